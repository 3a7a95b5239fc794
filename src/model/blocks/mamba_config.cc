// SPDX-License-Identifier: MIT
#include "model/blocks/mamba_config.h"

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/json_text.h"
#include "model/config_reader.h"

namespace mb {
namespace {

using nlohmann::json;

void parse_dt_rank(const ConfigReader& reader, const char* key, int64_t d_model, MambaMixerConfig& config) {
  config.dt_rank = (d_model + 15) / 16;
  if (!reader.has(key)) return;
  const json& value = reader.at(key);
  if (value.is_string()) {
    if (value.get<std::string>() != "auto")
      throw Error(reader.where() + ": '" + key + "' must be a positive integer or \"auto\", got " +
                  json_excerpt(value));
    return;
  }
  config.dt_rank = reader.positive_int_value(key, value, kMaxDModel);
}

void parse_biases(const ConfigReader& reader, const char* bias, const char* conv_bias, bool from_checkpoint,
                  MambaMixerConfig& config) {
  config.use_bias_from_checkpoint = from_checkpoint && !reader.has(bias);
  config.use_bias = reader.boolean_or(bias, false);
  config.use_conv_bias_from_checkpoint = from_checkpoint && !reader.has(conv_bias);
  config.use_conv_bias = reader.boolean_or(conv_bias, true);
}

// Hugging Face Mamba2ForCausalLM. Absent keys take Mamba2Config's defaults, as transformers does.
MambaMixerConfig parse_hf_mamba2(const ConfigReader& reader, int64_t d_model) {
  MambaMixerConfig config;
  config.d_state = reader.positive_int_or("state_size", 128, 1 << 20);
  config.d_conv = reader.positive_int_or("conv_kernel", 4, 1 << 20);
  config.expand = reader.positive_int_or("expand", 2, 64);
  config.d_inner = config.expand * d_model;
  config.headdim = reader.positive_int_or("head_dim", 64, 1 << 16);
  config.ngroups = reader.positive_int_or("n_groups", 8, 1 << 16);
  const int64_t heads = reader.positive_int_or("num_heads", 128, 1 << 20);
  if (heads * config.headdim != config.d_inner)
    throw Error(reader.where() + ": num_heads x head_dim = " + std::to_string(heads) + " x " +
                std::to_string(config.headdim) +
                " does not equal expand x hidden_size = " + std::to_string(config.d_inner));
  parse_biases(reader, "use_bias", "use_conv_bias", true, config);
  config.chunk_size = reader.positive_int_or("chunk_size", 256, 1 << 16);
  parse_dt_limit(reader, "time_step_limit", config);
  return config;
}

}  // namespace

void parse_dt_limit(const ConfigReader& reader, const char* key, MambaMixerConfig& config) {
  if (!reader.has(key)) return;
  const json& value = reader.at(key);
  if (!value.is_array() || value.size() != 2)
    throw Error(reader.where() + ": '" + key + "' must be a list [min, max], got " + json_excerpt(value));
  config.dt_limit_min = reader.number_value(value[0], key);
  config.dt_limit_max = reader.number_value(value[1], key);
  if (!(config.dt_limit_min >= 0.0 && config.dt_limit_min <= config.dt_limit_max))
    throw Error(reader.where() + ": '" + key + "' must satisfy 0 <= min <= max, got " + json_excerpt(value));
}

MambaMixerConfig parse_hf_mamba_mixer(const ConfigReader& reader, const std::string& model_type,
                                      int64_t d_model) {
  if (model_type == "mamba2") return parse_hf_mamba2(reader, d_model);
  MambaMixerConfig config;
  if (model_type == "falcon_mamba") {
    config.mixer_rms_norm = true;
    // FalconMambaConfig's own default when the key is absent.
    config.mixer_rms_eps = reader.positive_number_or("mixer_rms_eps", 1e-6);
  }
  config.d_state = reader.positive_int("state_size", 1 << 20);
  config.d_conv = reader.positive_int("conv_kernel", 1 << 20);
  config.expand = reader.positive_int_or("expand", 2, 64);
  config.d_inner = reader.positive_int_or("intermediate_size", config.expand * d_model, kMaxDModel * 8);
  // HF lets a stated intermediate_size override expand, and tiiuae/falcon-mamba-7b relies on it
  // (expand 16 beside intermediate_size 8192 = 2 x 4096), so for FalconMamba expand follows.
  if (config.mixer_rms_norm && config.d_inner % d_model == 0) config.expand = config.d_inner / d_model;
  parse_dt_rank(reader, "time_step_rank", d_model, config);
  parse_biases(reader, "use_bias", "use_conv_bias", true, config);
  return config;
}

MambaMixerConfig parse_original_mamba_mixer(const ConfigReader& ssm, int64_t d_model, Architecture& arch) {
  MambaMixerConfig config;
  const std::string layer = ssm.string_or("layer", "Mamba1");
  if (layer == "Mamba1") {
    arch = Architecture::Mamba1;
    config.d_state = ssm.positive_int_or("d_state", 16, 1 << 20);
    config.d_conv = ssm.positive_int_or("d_conv", 4, 1 << 20);
    config.expand = ssm.positive_int_or("expand", 2, 64);
    config.d_inner = config.expand * d_model;
    parse_dt_rank(ssm, "dt_rank", d_model, config);
    parse_biases(ssm, "bias", "conv_bias", false, config);
  } else if (layer == "Mamba2") {
    // mamba_ssm's Mamba2 module defaults.
    arch = Architecture::Mamba2;
    config.d_state = ssm.positive_int_or("d_state", 128, 1 << 20);
    config.d_conv = ssm.positive_int_or("d_conv", 4, 1 << 20);
    config.expand = ssm.positive_int_or("expand", 2, 64);
    config.d_inner = config.expand * d_model;
    config.headdim = ssm.positive_int_or("headdim", 64, 1 << 16);
    config.ngroups = ssm.positive_int_or("ngroups", 1, 1 << 16);
    config.chunk_size = ssm.positive_int_or("chunk_size", 256, 1 << 16);
    parse_biases(ssm, "bias", "conv_bias", false, config);
    config.gated_norm = ssm.boolean_or("rmsnorm", true);
    if (ssm.boolean_or("norm_before_gate", false))
      throw Error(ssm.where() +
                  ": norm_before_gate = true is not supported (released Mamba-2 models use false)");
    if (ssm.has("d_ssm") && ssm.positive_int("d_ssm", kMaxDModel * 8) != config.d_inner)
      throw Error(ssm.where() + ": d_ssm other than d_inner (a partly SSM mixer) is not supported");
    parse_dt_limit(ssm, "dt_limit", config);
  } else if (layer == "Mamba3") {
    arch = Architecture::Mamba3;
    config.d_state = ssm.positive_int_or("d_state", 128, 1 << 20);
    config.expand = ssm.positive_int_or("expand", 2, 64);
    config.d_inner = config.expand * d_model;
    config.headdim = ssm.positive_int_or("headdim", 64, 1 << 12);
    config.ngroups = ssm.positive_int_or("ngroups", 1, 1 << 12);
    config.rope_fraction = ssm.positive_number_or("rope_fraction", 0.5);
    config.a_floor = ssm.positive_number_or("A_floor", 1e-4);
    config.is_outproj_norm = ssm.boolean_or("is_outproj_norm", false);
    config.chunk_size = ssm.positive_int_or("chunk_size", 64, 1 << 16);
  } else {
    throw Error(ssm.where() + ": ssm_cfg.layer '" + layer +
                "' is not supported (expected Mamba1, Mamba2 or Mamba3)");
  }
  return config;
}

void validate_mamba_mixer(const MambaMixerConfig& config, Architecture arch, int64_t d_model,
                          const std::string& where) {
  auto fail = [&](const std::string& message) { throw Error(where + ": " + message); };
  if (arch == Architecture::Mamba1) {
    if (config.d_inner != config.expand * d_model)
      fail("intermediate_size " + std::to_string(config.d_inner) +
           " != expand x hidden_size = " + std::to_string(config.expand * d_model));
    if (config.d_state > 256)
      fail("state_size " + std::to_string(config.d_state) + " exceeds the supported 256");
    if (config.d_conv > 16)
      fail("conv_kernel " + std::to_string(config.d_conv) + " exceeds the supported 16");
  } else if (arch == Architecture::Mamba2) {
    if (config.d_inner % config.headdim != 0)
      fail("d_inner " + std::to_string(config.d_inner) + " is not a multiple of the head size " +
           std::to_string(config.headdim));
    if (config.n_heads() % config.ngroups != 0)
      fail("the head count " + std::to_string(config.n_heads()) + " is not a multiple of the group count " +
           std::to_string(config.ngroups));
    if (config.d_state > 256)
      fail("state size " + std::to_string(config.d_state) + " exceeds the supported 256");
    if (config.d_conv > 16)
      fail("conv kernel " + std::to_string(config.d_conv) + " exceeds the supported 16");
  } else {
    if (config.d_inner % config.headdim != 0)
      fail("d_inner " + std::to_string(config.d_inner) + " is not a multiple of headdim " +
           std::to_string(config.headdim));
    if (config.n_heads() % config.ngroups != 0)
      fail("the head count " + std::to_string(config.n_heads()) + " is not a multiple of ngroups " +
           std::to_string(config.ngroups));
    if (config.d_state > 256)
      fail("d_state " + std::to_string(config.d_state) + " exceeds the supported 256");
    // RoPE rotates the first 2 * floor(floor(d_state * rope_fraction) / 2) state dims, so any
    // d_state works; mamba_ssm only defines the two fractions.
    if (config.rope_fraction != 0.5 && config.rope_fraction != 1.0)
      fail("ssm_cfg.rope_fraction must be 0.5 or 1.0, got " + std::to_string(config.rope_fraction));
    if (!std::isfinite(config.a_floor)) fail("ssm_cfg.A_floor must be a finite positive number");
  }
  if (config.mixer_rms_norm && !(config.mixer_rms_eps < 1.0))
    fail("'mixer_rms_eps' must be a positive number below 1");
}

namespace {

// JSON has no infinity: the unlimited default is left out rather than written as null.
void add_dt_limit(const MambaMixerConfig& c, const char* key, json& out) {
  if (std::isfinite(c.dt_limit_max) || c.dt_limit_min != 0.0)
    out[key] = {c.dt_limit_min, std::isfinite(c.dt_limit_max) ? json(c.dt_limit_max) : json("Infinity")};
}

}  // namespace

void add_hf_mamba_mixer_keys(const MambaMixerConfig& c, Architecture arch, json& hf) {
  hf["state_size"] = c.d_state;
  hf["conv_kernel"] = c.d_conv;
  hf["expand"] = c.expand;
  hf["use_bias"] = c.use_bias;
  hf["use_conv_bias"] = c.use_conv_bias;
  if (arch == Architecture::Mamba2) {
    hf["num_heads"] = c.n_heads();
    hf["head_dim"] = c.headdim;
    hf["n_groups"] = c.ngroups;
    hf["chunk_size"] = c.chunk_size;
    add_dt_limit(c, "time_step_limit", hf);
    return;
  }
  hf["intermediate_size"] = c.d_inner;
  hf["time_step_rank"] = c.dt_rank;
  if (c.mixer_rms_norm) hf["mixer_rms_eps"] = c.mixer_rms_eps;
}

json original_mamba_mixer_json(const MambaMixerConfig& c, Architecture arch) {
  json ssm;
  if (arch == Architecture::Mamba1) {
    ssm = {{"layer", "Mamba1"},           {"d_state", c.d_state}, {"d_conv", c.d_conv},
           {"expand", c.expand},          {"dt_rank", c.dt_rank}, {"bias", c.use_bias},
           {"conv_bias", c.use_conv_bias}};
  } else if (arch == Architecture::Mamba2) {
    ssm = {{"layer", "Mamba2"},          {"d_state", c.d_state}, {"d_conv", c.d_conv},
           {"expand", c.expand},         {"headdim", c.headdim}, {"ngroups", c.ngroups},
           {"chunk_size", c.chunk_size}, {"bias", c.use_bias},   {"conv_bias", c.use_conv_bias},
           {"rmsnorm", c.gated_norm}};
    add_dt_limit(c, "dt_limit", ssm);
  } else {
    ssm = {{"layer", "Mamba3"},         {"d_state", c.d_state},
           {"expand", c.expand},        {"headdim", c.headdim},
           {"ngroups", c.ngroups},      {"rope_fraction", c.rope_fraction},
           {"A_floor", c.a_floor},      {"is_outproj_norm", c.is_outproj_norm},
           {"chunk_size", c.chunk_size}};
  }
  return ssm;
}

}  // namespace mb

// SPDX-License-Identifier: MIT
// The original state-spaces form of the Mamba configs (d_model, n_layer, ssm_cfg {layer: Mamba1,
// Mamba2 or Mamba3, ...}), as mamba_ssm's MambaConfig reads it: a separate path beside the
// declared Hugging Face families, since its keys nest (ssm_cfg) and its defaults are mamba_ssm's
// modules' own. parse_model_config takes it for a config with neither model_type nor hidden_size.
// The fingerprint hashes such a config by the declared family of its mixer (family_of), whose
// keys hold the same ModelConfig fields.
#include <cmath>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/json_text.h"
#include "model/config_reader.h"
#include "model/families/families.h"

namespace mb {
namespace {

using nlohmann::json;

void parse_dt_rank(const ConfigReader& reader, int64_t d_model, MambaMixerConfig& m) {
  m.dt_rank = (d_model + 15) / 16;
  if (!reader.has("dt_rank")) return;
  const json& value = reader.at("dt_rank");
  if (value.is_string()) {
    if (value.get<std::string>() != "auto")
      throw Error(reader.where() + ": 'dt_rank' must be a positive integer or \"auto\", got " +
                  json_excerpt(value));
    return;
  }
  m.dt_rank = reader.positive_int_value("dt_rank", value, kMaxDModel);
}

void parse_biases(const ConfigReader& ssm, MambaMixerConfig& m) {
  m.use_bias = ssm.boolean_or("bias", false);
  m.use_conv_bias = ssm.boolean_or("conv_bias", true);
}

// The ssm_cfg object of a Mamba-1 or Mamba-2; sets `arch` from its "layer".
MambaMixerConfig parse_mixer(const ConfigReader& ssm, int64_t d_model, Architecture& arch) {
  MambaMixerConfig m;
  const std::string layer = ssm.string_or("layer", "Mamba1");
  if (layer == "Mamba1") {
    arch = Architecture::Mamba1;
    m.d_state = ssm.positive_int_or("d_state", 16, 1 << 20);
    m.d_conv = ssm.positive_int_or("d_conv", 4, 1 << 20);
    m.expand = ssm.positive_int_or("expand", 2, 64);
    m.d_inner = m.expand * d_model;
    parse_dt_rank(ssm, d_model, m);
    parse_biases(ssm, m);
  } else if (layer == "Mamba2") {
    // mamba_ssm's Mamba2 module defaults.
    arch = Architecture::Mamba2;
    m.d_state = ssm.positive_int_or("d_state", 128, 1 << 20);
    m.d_conv = ssm.positive_int_or("d_conv", 4, 1 << 20);
    m.expand = ssm.positive_int_or("expand", 2, 64);
    m.d_inner = m.expand * d_model;
    m.headdim = ssm.positive_int_or("headdim", 64, 1 << 16);
    m.ngroups = ssm.positive_int_or("ngroups", 1, 1 << 16);
    m.chunk_size = ssm.positive_int_or("chunk_size", 256, 1 << 16);
    parse_biases(ssm, m);
    m.gated_norm = ssm.boolean_or("rmsnorm", true);
    if (ssm.boolean_or("norm_before_gate", false))
      throw Error(ssm.where() +
                  ": norm_before_gate = true is not supported (released Mamba-2 models use false)");
    if (ssm.has("d_ssm") && ssm.positive_int("d_ssm", kMaxDModel * 8) != m.d_inner)
      throw Error(ssm.where() + ": d_ssm other than d_inner (a partly SSM mixer) is not supported");
    parse_dt_limit(ssm, "dt_limit", m);
  } else {
    throw Error(ssm.where() + ": ssm_cfg.layer '" + layer +
                "' is not supported (expected Mamba1, Mamba2 or Mamba3)");
  }
  return m;
}

// JSON has no infinity: the unlimited default is left out rather than written as null.
void add_dt_limit(const MambaMixerConfig& m, json& out) {
  if (std::isfinite(m.dt_limit_max) || m.dt_limit_min != 0.0)
    out["dt_limit"] = {m.dt_limit_min,
                       std::isfinite(m.dt_limit_max) ? json(m.dt_limit_max) : json("Infinity")};
}

json mixer_json(const MambaMixerConfig& m, Architecture arch) {
  json ssm;
  if (arch == Architecture::Mamba1) {
    ssm = {{"layer", "Mamba1"},           {"d_state", m.d_state}, {"d_conv", m.d_conv},
           {"expand", m.expand},          {"dt_rank", m.dt_rank}, {"bias", m.use_bias},
           {"conv_bias", m.use_conv_bias}};
  } else if (arch == Architecture::Mamba2) {
    ssm = {{"layer", "Mamba2"},          {"d_state", m.d_state}, {"d_conv", m.d_conv},
           {"expand", m.expand},         {"headdim", m.headdim}, {"ngroups", m.ngroups},
           {"chunk_size", m.chunk_size}, {"bias", m.use_bias},   {"conv_bias", m.use_conv_bias},
           {"rmsnorm", m.gated_norm}};
    add_dt_limit(m, ssm);
  } else {
    ssm = {{"layer", "Mamba3"},         {"d_state", m.d_state},
           {"expand", m.expand},        {"headdim", m.headdim},
           {"ngroups", m.ngroups},      {"rope_fraction", m.rope_fraction},
           {"A_floor", m.a_floor},      {"is_outproj_norm", m.is_outproj_norm},
           {"chunk_size", m.chunk_size}};
  }
  return ssm;
}

}  // namespace

void parse_original_config(const json& object, const std::string& where, ModelConfig& config) {
  const ConfigReader reader(object, where);
  static const json empty = json::object();
  const json& ssm = reader.has("ssm_cfg") ? reader.at("ssm_cfg") : empty;
  if (!ssm.is_object()) throw Error(where + ": 'ssm_cfg' must be an object, got " + json_excerpt(ssm));
  const ConfigReader ssm_reader(ssm, where + " (ssm_cfg)");
  if (!reader.boolean_or("rms_norm", true))
    throw Error(where + ": rms_norm = false (LayerNorm blocks) is not supported");
  // Hybrid and MLP blocks of MambaLMHeadModel are not implemented: refuse rather than skip them.
  if (reader.has("d_intermediate") &&
      !(reader.at("d_intermediate").is_number_integer() && reader.at("d_intermediate").get<int64_t>() == 0))
    throw Error(where + ": 'd_intermediate' > 0 (MLP blocks) is not supported");
  if (reader.has("attn_layer_idx") &&
      !(reader.at("attn_layer_idx").is_array() && reader.at("attn_layer_idx").empty()))
    throw Error(where + ": 'attn_layer_idx' lists attention layers; hybrid models are not supported");
  if (ssm_reader.string_or("layer", "Mamba1") == "Mamba3") {
    // Declared once (mamba3_family): the top-level keys and ssm_cfg's in one object.
    json merged = object;
    merged.erase("ssm_cfg");
    for (const auto& [key, value] : ssm.items()) merged[key] = value;
    parse_family_keys(mamba3_family(), ConfigReader(merged, where), config);
    return;
  }
  config.d_model = reader.positive_int("d_model", kMaxDModel);
  config.n_layer = reader.positive_int("n_layer", kMaxLayers);
  config.vocab_size = reader.positive_int("vocab_size", kMaxVocab);
  config.pad_vocab_size_multiple = reader.positive_int_or("pad_vocab_size_multiple", 8, 1 << 16);
  config.tie_embeddings = reader.boolean_or("tie_embeddings", true);
  // mamba_ssm hard-wires the norm epsilon to 1e-5 for this form.
  config.norm_eps = static_cast<float>(reader.positive_number_or("norm_epsilon", 1e-5));
  config.ssm = parse_mixer(ssm_reader, config.d_model, config.arch);
}

json original_config_json(const ModelConfig& c) {
  if (c.family != ModelFamily::Mamba)
    throw Error("the hybrid models have no state-spaces form of config.json; write the Hugging Face form");
  return {{"d_model", c.d_model},
          {"n_layer", c.n_layer},
          {"d_intermediate", 0},
          {"attn_layer_idx", json::array()},
          {"vocab_size", c.vocab_size},
          {"ssm_cfg", mixer_json(c.ssm, c.arch)},
          {"rms_norm", true},
          {"residual_in_fp32", true},
          {"fused_add_norm", true},
          {"pad_vocab_size_multiple", c.pad_vocab_size_multiple},
          {"tie_embeddings", c.tie_embeddings}};
}

}  // namespace mb

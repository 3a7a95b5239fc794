// SPDX-License-Identifier: MIT
#include "model/config.h"

#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/json_text.h"
#include "io/file_io.h"
#include "model/config_reader.h"
#include "model/family.h"
#include "model/weight_schema.h"

namespace mb {

using nlohmann::json;

int64_t ConfigReader::positive_int(const char* key, int64_t max_value) const {
  if (!has(key)) throw Error(where_ + ": missing required key '" + key + "'");
  return positive_int_value(key, object_[key], max_value);
}

int64_t ConfigReader::positive_int_or(const char* key, int64_t fallback, int64_t max_value) const {
  return has(key) ? positive_int(key, max_value) : fallback;
}

bool ConfigReader::boolean_or(const char* key, bool fallback) const {
  if (!has(key)) return fallback;
  if (!object_[key].is_boolean())
    throw Error(where_ + ": '" + key + "' must be true or false, got " + json_excerpt(object_[key]));
  return object_[key].get<bool>();
}

double ConfigReader::positive_number_or(const char* key, double fallback) const {
  if (!has(key)) return fallback;
  const json& value = object_[key];
  if (!value.is_number() || !(value.get<double>() > 0.0))
    throw Error(where_ + ": '" + key + "' must be a positive number, got " + json_excerpt(value));
  return value.get<double>();
}

std::string ConfigReader::string_or(const char* key, const std::string& fallback) const {
  if (!has(key)) return fallback;
  if (!object_[key].is_string())
    throw Error(where_ + ": '" + key + "' must be a string, got " + json_excerpt(object_[key]));
  return object_[key].get<std::string>();
}

int64_t ConfigReader::positive_int_value(const std::string& key, const json& value, int64_t max_value) const {
  if (!value.is_number_integer() || value.get<int64_t>() <= 0)
    throw Error(where_ + ": '" + key + "' must be a positive integer, got " + json_excerpt(value));
  const int64_t v = value.get<int64_t>();
  if (v > max_value)
    throw Error(where_ + ": '" + key + "' = " + std::to_string(v) + " exceeds the supported maximum " +
                std::to_string(max_value));
  return v;
}

double ConfigReader::number_value(const json& value, const std::string& key) const {
  if (value.is_number()) return value.get<double>();
  if (value.is_string()) {
    const std::string text = value.get<std::string>();
    if (text == "Infinity") return INFINITY;
    if (text == "-Infinity") return -INFINITY;
  }
  throw Error(where_ + ": '" + key + "' must hold numbers, got " + json_excerpt(value));
}

namespace {

void parse_hf(const ConfigReader& reader, ModelConfig& config) {
  const std::string model_type = reader.string_or("model_type", "mamba");
  if (const Family* family = family_by_model_type(model_type))
    return parse_family_keys(*family, reader, config);
  if (model_type == "granitemoehybrid") return parse_granite_hybrid(reader, config);
  if (model_type == "nemotron_h") return parse_nemotron_h(reader, config);
  if (model_type != "mamba" && model_type != "falcon_mamba" && model_type != "mamba2") {
    std::string expected = "\"mamba\", \"mamba2\", \"falcon_mamba\", \"granitemoehybrid\", \"nemotron_h\"";
    for (const Family* family : all_families())
      for (const std::string& type : family->model_types) expected += ", \"" + type + "\"";
    throw Error(reader.where() + ": model_type '" + model_type + "' is not supported (expected one of " +
                expected + ")");
  }
  const bool mamba2 = model_type == "mamba2";
  config.arch = mamba2 ? Architecture::Mamba2 : Architecture::Mamba1;
  config.d_model = reader.positive_int("hidden_size", kMaxDModel);
  config.n_layer = reader.positive_int("num_hidden_layers", kMaxLayers);
  config.vocab_size = reader.positive_int("vocab_size", kMaxVocab);
  config.ssm = parse_hf_mamba_mixer(reader, model_type, config.d_model);
  // MambaConfig reads either epsilon key; Mamba2Config only its own.
  const double eps = mamba2 ? reader.positive_number_or("layer_norm_epsilon", 1e-5)
                            : reader.positive_number_or("layer_norm_epsilon",
                                                        reader.positive_number_or("rms_norm_eps", 1e-5));
  config.norm_eps = static_cast<float>(eps);
  config.tie_embeddings = reader.boolean_or("tie_word_embeddings", !mamba2);
  config.pad_vocab_size_multiple = reader.positive_int_or("pad_vocab_size_multiple", 1, 1 << 16);
}

void parse_original(const ConfigReader& reader, ModelConfig& config) {
  config.d_model = reader.positive_int("d_model", kMaxDModel);
  config.n_layer = reader.positive_int("n_layer", kMaxLayers);
  config.vocab_size = reader.positive_int("vocab_size", kMaxVocab);
  config.pad_vocab_size_multiple = reader.positive_int_or("pad_vocab_size_multiple", 8, 1 << 16);
  config.tie_embeddings = reader.boolean_or("tie_embeddings", true);
  if (!reader.boolean_or("rms_norm", true))
    throw Error(reader.where() + ": rms_norm = false (LayerNorm blocks) is not supported");
  // mamba_ssm hard-wires the norm epsilon to 1e-5 for this form.
  config.norm_eps = static_cast<float>(reader.positive_number_or("norm_epsilon", 1e-5));

  static const json empty = json::object();
  const json& ssm = reader.has("ssm_cfg") ? reader.at("ssm_cfg") : empty;
  if (!ssm.is_object())
    throw Error(reader.where() + ": 'ssm_cfg' must be an object, got " + json_excerpt(ssm));
  config.ssm = parse_original_mamba_mixer(ConfigReader(ssm, reader.where() + " (ssm_cfg)"), config.d_model,
                                          config.arch);
  // Hybrid and MLP blocks of MambaLMHeadModel are not implemented: refuse rather than skip them.
  if (reader.has("d_intermediate") &&
      !(reader.at("d_intermediate").is_number_integer() && reader.at("d_intermediate").get<int64_t>() == 0))
    throw Error(reader.where() + ": 'd_intermediate' > 0 (MLP blocks) is not supported");
  if (reader.has("attn_layer_idx") &&
      !(reader.at("attn_layer_idx").is_array() && reader.at("attn_layer_idx").empty()))
    throw Error(reader.where() +
                ": 'attn_layer_idx' lists attention layers; hybrid models are not supported");
}

void validate(const ModelConfig& config, const std::string& where) {
  if (const Family* family = find_family(config.family)) {
    // A declared family checks what its blocks need (its Mamba mixers' section, if it has any).
    if (family->validate) family->validate(config, where);
  } else {
    validate_mamba_mixer(config.ssm, config.arch, config.d_model, where);
    if (config.family != ModelFamily::Mamba) validate_hybrid(config, where);
  }
  if (!(config.norm_eps < 1.0f)) throw Error(where + ": the norm epsilon must be below 1");
}

}  // namespace

ModelConfig parse_model_config(const json& object, const std::string& where) {
  if (!object.is_object()) throw Error(where + ": config is not a JSON object");
  const ConfigReader reader(object, where);
  ModelConfig config;
  const bool hf_form = reader.has("model_type") || reader.has("hidden_size");
  if (hf_form)
    parse_hf(reader, config);
  else if (reader.has("d_model"))
    parse_original(reader, config);
  else
    throw Error(where +
                ": neither 'hidden_size' (Hugging Face form) nor 'd_model' (state-spaces form) is present");
  if (reader.has("eos_token_id")) {
    const json& eos = object["eos_token_id"];
    const auto add_eos = [&](const json& id) {
      if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() >= config.vocab_size)
        throw Error(where + ": 'eos_token_id' must be token ids inside the vocabulary, got " +
                    json_excerpt(eos));
      config.eos_token_ids.push_back(id.get<int32_t>());
    };
    // A single id is checked in place: wrapping it in a list would copy the value, whatever it holds.
    if (eos.is_array()) {
      for (const json& id : eos) add_eos(id);
    } else {
      add_eos(eos);
    }
  }
  const int64_t multiple = config.pad_vocab_size_multiple;
  config.vocab_rows = (config.vocab_size + multiple - 1) / multiple * multiple;
  validate(config, where);
  return config;
}

namespace {

// Python's json module writes float('inf') as a bare Infinity (Mamba2Config's default
// time_step_limit is (0.0, inf)), which is not JSON. Outside string literals, the tokens
// Infinity and -Infinity become the strings "Infinity" and "-Infinity", which the number readers
// above accept; everything else is left to the JSON parser.
std::string quote_python_infinities(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char ch = text[i];
    if (in_string) {
      out += ch;
      if (ch == '\\' && i + 1 < text.size())
        out += text[++i];
      else if (ch == '"')
        in_string = false;
      continue;
    }
    if (ch == '"') in_string = true;
    const bool negative = ch == '-' && text.compare(i + 1, 8, "Infinity") == 0;
    if (negative || text.compare(i, 8, "Infinity") == 0) {
      out += negative ? "\"-Infinity\"" : "\"Infinity\"";
      i += negative ? 8 : 7;
      continue;
    }
    out += ch;
  }
  return out;
}

}  // namespace

ModelConfig load_model_config(const std::string& dir) {
  const std::string path = (std::filesystem::path(dir) / "config.json").string();
  // A mistyped path is the usual cause; "has no config.json" would send the user looking for a
  // file in a folder that is not there.
  std::error_code error;
  if (!std::filesystem::exists(dir, error)) {
    const bool gguf_name = dir.size() >= 5 && dir.compare(dir.size() - 5, 5, ".gguf") == 0;
    throw Error(std::string(gguf_name ? "model file '" : "model folder '") + dir + "' does not exist");
  }
  if (!std::filesystem::exists(path)) throw Error("'" + dir + "' has no config.json");
  // A config nests two or three levels; 64 leaves room for any plausible extension.
  const json object =
      parse_json_text(quote_python_infinities(read_file_limited(path, kMaxJsonFileBytes, "config file")),
                      "'" + path + "'", 64);
  return parse_model_config(object, "'" + path + "'");
}

std::vector<BlockSpec> ModelConfig::blocks() const {
  if (const Family* declared = find_family(family)) return declared->blocks(*this);
  if (family != ModelFamily::Mamba) return hybrid_blocks(*this);
  const BlockKind mixer = arch == Architecture::Mamba1   ? BlockKind::Mamba1Mixer
                          : arch == Architecture::Mamba2 ? BlockKind::Mamba2Mixer
                                                         : BlockKind::Mamba3Mixer;
  std::vector<BlockSpec> list;
  for (int64_t l = 0; l < n_layer; ++l) list.push_back({mixer, l, {layer_prefix(l)}});
  return list;
}

json model_config_to_hf_json(const ModelConfig& c) {
  if (const Family* family = find_family(c.family)) return family_config_to_hf_json(*family, c);
  if (c.family != ModelFamily::Mamba) return hybrid_config_to_hf_json(c);
  const bool mamba2 = c.arch == Architecture::Mamba2;
  std::string model_type = mamba2 ? "mamba2" : "mamba",
              architecture = mamba2 ? "Mamba2ForCausalLM" : "MambaForCausalLM";
  if (c.ssm.mixer_rms_norm) {
    model_type = "falcon_mamba";
    architecture = "FalconMambaForCausalLM";
  }
  json hf = {{"model_type", model_type},
             {"architectures", {architecture}},
             {"hidden_size", c.d_model},
             {"num_hidden_layers", c.n_layer},
             {"vocab_size", c.vocab_size},
             {"layer_norm_epsilon", c.norm_eps},
             {"tie_word_embeddings", c.tie_embeddings},
             {"pad_vocab_size_multiple", c.pad_vocab_size_multiple},
             {"residual_in_fp32", true},
             {"bos_token_id", 0},
             {"eos_token_id", 0},
             {"pad_token_id", 0},
             {"hidden_act", "silu"},
             {"torch_dtype", "float32"}};
  if (mamba2) hf["rms_norm"] = true;
  add_hf_mamba_mixer_keys(c.ssm, c.arch, hf);
  return hf;
}

json model_config_to_original_json(const ModelConfig& c) {
  if (c.family != ModelFamily::Mamba)
    throw Error("the hybrid models have no state-spaces form of config.json; write the Hugging Face form");
  return {{"d_model", c.d_model},
          {"n_layer", c.n_layer},
          {"d_intermediate", 0},
          {"attn_layer_idx", json::array()},
          {"vocab_size", c.vocab_size},
          {"ssm_cfg", original_mamba_mixer_json(c.ssm, c.arch)},
          {"rms_norm", true},
          {"residual_in_fp32", true},
          {"fused_add_norm", true},
          {"pad_vocab_size_multiple", c.pad_vocab_size_multiple},
          {"tie_embeddings", c.tie_embeddings}};
}

}  // namespace mb

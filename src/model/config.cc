// SPDX-License-Identifier: MIT
#include "model/config.h"

#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>

#include "core/error.h"
#include "core/json_text.h"
#include "io/file_io.h"
#include "model/config_reader.h"
#include "model/families/families.h"
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

// The Hugging Face form: the declared family of its model_type (model/families/).
void parse_hf(const ConfigReader& reader, ModelConfig& config) {
  const std::string model_type = reader.string_or("model_type", "mamba");
  const Family* family = family_by_model_type(model_type);
  if (family == nullptr) {
    std::string expected;
    for (const Family* f : all_families())
      for (const std::string& type : f->model_types)
        expected += (expected.empty() ? "\"" : ", \"") + type + "\"";
    throw Error(reader.where() + ": model_type '" + model_type + "' is not supported (expected one of " +
                expected + ")");
  }
  parse_family_keys(*family, reader, config);
}

void validate(const ModelConfig& config, const std::string& where) {
  const Family* family = find_family(config);
  if (family == nullptr) throw Error(where + ": the config belongs to no declared family");
  // Each family checks what its blocks need (its Mamba mixers' section, if it has any).
  if (family->validate) family->validate(config, where);
  if (!(config.norm_eps < 1.0f)) throw Error(where + ": the norm epsilon must be below 1");
}

}  // namespace

ModelConfig parse_model_config(const json& original, const std::string& where) {
  if (!original.is_object()) throw Error(where + ": config is not a JSON object");
  // A Qwen3.5 vision-language config is read as its text model's (families/qwen35.h).
  const std::optional<json> text_model = qwen35_text_config(original);
  const json& object = text_model ? *text_model : original;
  const ConfigReader reader(object, where);
  ModelConfig config;
  const bool hf_form = reader.has("model_type") || reader.has("hidden_size");
  if (hf_form)
    parse_hf(reader, config);
  else if (reader.has("d_model"))
    parse_original_config(object, where, config);
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
  const Family* family = find_family(*this);
  if (family == nullptr) throw Error("the config belongs to no declared family");
  return family->blocks(*this);
}

json model_config_to_hf_json(const ModelConfig& c) {
  const Family* family = find_family(c);
  if (family == nullptr || family->model_types.empty())
    throw Error(std::string(family ? family->name : "this model") +
                " has no Hugging Face form of config.json; write the state-spaces form");
  return family_config_to_hf_json(*family, c);
}

json model_config_to_original_json(const ModelConfig& c) {
  return original_config_json(c);
}

}  // namespace mb

// SPDX-License-Identifier: MIT
// INTERIM, until the generic family engine (family.cc) lands on main: reads a Family's declared
// keys from a Hugging Face config, so the Falcon-H1 blocks can be checked against their golden
// now. Deleted when the branch merges the engine.
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/json_text.h"
#include "model/config_reader.h"
#include "model/family.h"

namespace mb {

void interim_parse_family_keys(const Family& family, const ConfigReader& reader, ModelConfig& config) {
  for (const ConfigKey& key : family.keys) {
    const char* name = key.hf.c_str();
    const bool present = reader.has(name);
    if (!present && !key.fallback) throw Error(reader.where() + ": '" + key.hf + "' is required");
    const nlohmann::json value = present ? reader.at(name) : nlohmann::json();
    const KeyField field = key.field(config);
    const auto bad = [&](const std::string& what) {
      return Error(reader.where() + ": '" + key.hf + "' must be " + what + ", got " + json_excerpt(value));
    };
    switch (key.type) {
      case KeyType::Int: {
        int64_t v = present ? 0 : std::get<int64_t>(*key.fallback);
        if (present) {
          if (!value.is_number_integer() || value.get<int64_t>() < key.min || value.get<int64_t>() > key.max)
            throw bad("an integer in range");
          v = value.get<int64_t>();
        }
        *std::get<int64_t*>(field) = v;
        break;
      }
      case KeyType::Number: {
        double v = present ? 0.0 : std::get<double>(*key.fallback);
        if (present) {
          if (!value.is_number() || !(value.get<double>() >= key.min && value.get<double>() <= key.max))
            throw bad("a number in range");
          v = value.get<double>();
        }
        if (auto* d = std::get_if<double*>(&field)) **d = v;
        if (auto* f = std::get_if<float*>(&field)) **f = static_cast<float>(v);
        break;
      }
      case KeyType::Bool:
        if (present && !value.is_boolean()) throw bad("true or false");
        *std::get<bool*>(field) = present ? value.get<bool>() : std::get<bool>(*key.fallback);
        break;
      case KeyType::String:
        if (present && !value.is_string()) throw bad("a string");
        *std::get<std::string*>(field) = present ? value.get<std::string>() : std::get<std::string>(*key.fallback);
        if (!key.choices.empty()) {
          bool ok = false;
          for (const std::string& c : key.choices) ok = ok || c == *std::get<std::string*>(field);
          if (!ok) throw bad("one of the supported values");
        }
        break;
      case KeyType::Numbers: {
        std::vector<double> v = present ? std::vector<double>() : std::get<std::vector<double>>(*key.fallback);
        if (present) {
          if (!value.is_array()) throw bad("a list of numbers");
          for (const auto& x : value) {
            if (!x.is_number()) throw bad("a list of numbers");
            v.push_back(x.get<double>());
          }
        }
        *std::get<std::vector<double>*>(field) = v;
        break;
      }
    }
  }
  if (family.parse_extra) family.parse_extra(reader, config);
}

nlohmann::json interim_family_config_to_hf_json(const Family& family, const ModelConfig& config) {
  nlohmann::json hf = nlohmann::json::object();
  ModelConfig& c = const_cast<ModelConfig&>(config);  // the fields are only read
  for (const ConfigKey& key : family.keys)
    std::visit([&](auto* p) { hf[key.hf] = *p; }, key.field(c));
  if (family.hf_extra) family.hf_extra(config, hf);
  return hf;
}

}  // namespace mb

// SPDX-License-Identifier: MIT
#include "model/family.h"

#include <cmath>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/json_text.h"
#include "io/gguf.h"
#include "model/config_reader.h"
#include "model/weight_schema.h"

namespace mb {

using nlohmann::json;

ConfigKey ConfigKey::aka(std::vector<std::string> names) const {
  ConfigKey k = *this;
  k.aliases = std::move(names);
  return k;
}

ConfigKey ConfigKey::in_gguf(std::string name) const {
  ConfigKey k = *this;
  k.gguf = std::move(name);
  return k;
}

ConfigKey ConfigKey::with_effect(KeyEffect e) const {
  ConfigKey k = *this;
  k.effect = e;
  return k;
}

ConfigKey ConfigKey::only_default(std::string reason) const {
  ConfigKey k = *this;
  k.only_default_reason = std::move(reason);
  return k;
}

ConfigKey int_key(std::string hf, std::string gguf, FieldOf field, std::optional<int64_t> fallback,
                  int64_t min, int64_t max, KeyEffect effect) {
  ConfigKey k{std::move(hf), {}, std::move(gguf), KeyType::Int};
  if (fallback) k.fallback = *fallback;
  k.min = static_cast<double>(min);
  k.max = static_cast<double>(max);
  k.effect = effect;
  k.field = std::move(field);
  return k;
}

ConfigKey number_key(std::string hf, std::string gguf, FieldOf field, std::optional<double> fallback,
                     double min, double max, KeyEffect effect) {
  ConfigKey k{std::move(hf), {}, std::move(gguf), KeyType::Number};
  if (fallback) k.fallback = *fallback;
  k.min = min;
  k.max = max;
  k.effect = effect;
  k.field = std::move(field);
  return k;
}

ConfigKey bool_key(std::string hf, std::string gguf, FieldOf field, std::optional<bool> fallback,
                   KeyEffect effect) {
  ConfigKey k{std::move(hf), {}, std::move(gguf), KeyType::Bool};
  if (fallback) k.fallback = *fallback;
  k.effect = effect;
  k.field = std::move(field);
  return k;
}

ConfigKey string_key(std::string hf, std::string gguf, FieldOf field, std::optional<std::string> fallback,
                     std::vector<std::string> choices, KeyEffect effect) {
  ConfigKey k{std::move(hf), {}, std::move(gguf), KeyType::String};
  if (fallback) k.fallback = *fallback;
  k.choices = std::move(choices);
  k.effect = effect;
  k.field = std::move(field);
  return k;
}

ConfigKey numbers_key(std::string hf, std::string gguf, FieldOf field,
                      std::optional<std::vector<double>> fallback, KeyEffect effect) {
  ConfigKey k{std::move(hf), {}, std::move(gguf), KeyType::Numbers};
  if (fallback) k.fallback = *fallback;
  k.min = -INFINITY;
  k.max = INFINITY;
  k.effect = effect;
  k.field = std::move(field);
  return k;
}

namespace {

// A declared value as JSON: how config.json holds it, and the form every other path (the GGUF
// metadata, the default, the hash) goes through, so that they cannot disagree.
json key_value_json(const KeyValue& value) {
  return std::visit([](const auto& v) { return json(v); }, value);
}

json field_json(const ConfigKey& key, const ModelConfig& config) {
  // The accessor takes a mutable config because parsing writes through it; reading does not.
  const KeyField field = key.field(const_cast<ModelConfig&>(config));
  return std::visit(
      [](auto* p) -> json {
        if constexpr (std::is_same_v<decltype(p), float*>)
          return static_cast<double>(*p);
        else
          return json(*p);
      },
      field);
}

std::string bound_text(double v) {
  if (v == std::floor(v) && std::fabs(v) < 1e15) return std::to_string(static_cast<int64_t>(v));
  return json(v).dump();
}

// Checks `value` against the key's type and bounds; the message names `where` and `name`.
void check_value(const ConfigKey& key, const std::string& name, const json& value, const std::string& where) {
  const auto fail = [&](const std::string& what) {
    throw Error(where + ": '" + name + "' must be " + what + ", got " + json_excerpt(value));
  };
  const std::string range = "in [" + bound_text(key.min) + ", " + bound_text(key.max) + "]";
  switch (key.type) {
    case KeyType::Int:
      if (!value.is_number_integer()) fail("an integer " + range);
      if (value.is_number_unsigned() ? value.get<uint64_t>() > static_cast<uint64_t>(key.max)
                                     : (static_cast<double>(value.get<int64_t>()) < key.min ||
                                        static_cast<double>(value.get<int64_t>()) > key.max))
        fail("an integer " + range);
      return;
    case KeyType::Number: {
      if (!value.is_number()) fail("a number " + range);
      const double v = value.get<double>();
      if (!std::isfinite(v) || v < key.min || v > key.max) fail("a finite number " + range);
      return;
    }
    case KeyType::Bool:
      if (!value.is_boolean()) fail("true or false");
      return;
    case KeyType::String: {
      if (!value.is_string()) fail("a string");
      if (key.choices.empty()) return;
      for (const std::string& choice : key.choices)
        if (value.get<std::string>() == choice) return;
      std::string list;
      for (const std::string& choice : key.choices) list += (list.empty() ? "\"" : ", \"") + choice + "\"";
      fail("one of " + list);
      return;
    }
    case KeyType::Numbers:
      if (!value.is_array()) fail("a list of numbers");
      for (const json& v : value)
        if (!v.is_number() || !std::isfinite(v.get<double>())) fail("a list of finite numbers");
      return;
  }
}

void store(const ConfigKey& key, const json& value, ModelConfig& config) {
  std::visit(
      [&](auto* p) {
        using T = std::remove_pointer_t<decltype(p)>;
        if constexpr (std::is_same_v<T, float>)
          *p = static_cast<float>(value.get<double>());
        else
          *p = value.get<T>();
      },
      key.field(config));
}

// The first of the key's names the config has, or null.
const std::string* present_name(const ConfigKey& key, const ConfigReader& reader) {
  if (reader.has(key.hf.c_str())) return &key.hf;
  for (const std::string& alias : key.aliases)
    if (reader.has(alias.c_str())) return &alias;
  return nullptr;
}

void read_key(const ConfigKey& key, const ConfigReader& reader, ModelConfig& config) {
  const std::string* name = present_name(key, reader);
  if (name == nullptr) {
    if (!key.fallback) throw Error(reader.where() + ": missing required key '" + key.hf + "'");
    store(key, key_value_json(*key.fallback), config);
    return;
  }
  const json& value = reader.at(name->c_str());
  if (!key.only_default_reason.empty() && !(key.fallback && value == key_value_json(*key.fallback)))
    throw Error(reader.where() + ": '" + *name + "' = " + json_excerpt(value) + " is not supported (" +
                key.only_default_reason + ")");
  check_value(key, *name, value, reader.where());
  store(key, value, config);
}

// One {arch}.* value as the JSON its key's type takes; null when the file's type does not fit
// (reported by check_value when parse_model_config reads it, naming the HF key).
json gguf_value_json(const GgufValue& value, KeyType type) {
  const bool integer = value.element_type != GgufType::Float32 && value.element_type != GgufType::Float64 &&
                       value.element_type != GgufType::String && value.element_type != GgufType::Bool;
  if (type == KeyType::Numbers) {
    if (!value.is_array()) return json();
    json list = json::array();
    if (!value.floats.empty())
      for (double v : value.floats) list.push_back(v);
    else
      for (int64_t v : value.integers) list.push_back(v);
    return list;
  }
  if (value.is_array()) return json();
  switch (type) {
    case KeyType::Int:
      return integer && !value.integers.empty() ? json(value.integers[0]) : json();
    case KeyType::Number:
      if (!value.floats.empty()) return value.floats[0];
      return integer && !value.integers.empty() ? json(value.integers[0]) : json();
    case KeyType::Bool:
      return value.element_type == GgufType::Bool && !value.integers.empty() ? json(value.integers[0] != 0)
                                                                             : json();
    case KeyType::String:
      return value.element_type == GgufType::String && !value.strings.empty() ? json(value.strings[0])
                                                                              : json();
    case KeyType::Numbers:
      break;
  }
  return json();
}

GgufValue gguf_value_of(const ConfigKey& key, const json& value) {
  switch (key.type) {
    case KeyType::Int:
      return key.min < 0 ? GgufValue::i32(value.get<int32_t>()) : GgufValue::u32(value.get<uint32_t>());
    case KeyType::Number:
      return GgufValue::f32(static_cast<float>(value.get<double>()));
    case KeyType::Bool:
      return GgufValue::boolean(value.get<bool>());
    case KeyType::String:
      return GgufValue::string(value.get<std::string>());
    case KeyType::Numbers:
      return GgufValue::float_array(GgufType::Float32, value.get<std::vector<double>>());
  }
  throw Error("unknown key type");
}

uint64_t fnv1a(uint64_t hash, const void* data, size_t size) {
  const auto* bytes = static_cast<const uint8_t*>(data);
  for (size_t i = 0; i < size; ++i) hash = (hash ^ bytes[i]) * 0x100000001b3ull;
  return hash;
}

}  // namespace

void parse_family_keys(const Family& family, const ConfigReader& reader, ModelConfig& config) {
  config.family = family.id;
  for (const ConfigKey& key : family.keys) read_key(key, reader, config);
  if (family.parse_extra) family.parse_extra(reader, config);
}

json gguf_family_config_json(const Family& family, const GgufFile& file, const std::string& arch,
                             int64_t vocab_rows) {
  json hf = {{"model_type", family.model_types.at(0)}};
  for (const ConfigKey& key : family.keys) {
    if (key.gguf.empty()) continue;
    const std::string name = arch + "." + key.gguf;
    const GgufValue* value = file.find(name);
    if (value == nullptr) continue;  // the HF default applies, as the loader's own would
    json v = gguf_value_json(*value, key.type);
    if (v.is_null())
      throw Error("'" + file.path() + "': metadata '" + name + "' holds " +
                  std::string(gguf_type_name(value->element_type)) + (value->is_array() ? " values" : "") +
                  ", not what '" + key.hf + "' takes");
    hf[key.hf] = std::move(v);
  }
  // What every file says the same way: the embedding's rows (the logits width), a head stored or
  // tied, the end-of-text token.
  hf["vocab_size"] = vocab_rows;
  const ModelTensors own = model_tensor_specs(ModelConfig{}, true, 0);
  hf["tie_word_embeddings"] = file.find_tensor(own.tail[kLmHead].gguf) == nullptr;
  if (const auto eos = file.unsigned_if_present("tokenizer.ggml.eos_token_id")) hf["eos_token_id"] = *eos;
  if (family.gguf_extra) family.gguf_extra(file, arch, hf);
  return hf;
}

json family_config_to_hf_json(const Family& family, const ModelConfig& config) {
  json hf = {{"model_type", family.model_types.at(0)},
             {"bos_token_id", 0},
             {"eos_token_id", 0},
             {"pad_token_id", 0},
             {"torch_dtype", "float32"}};
  for (const ConfigKey& key : family.keys) hf[key.hf] = field_json(key, config);
  if (family.hf_extra) family.hf_extra(config, hf);
  return hf;
}

void set_gguf_family_metadata(const Family& family, GgufWriter& writer, const ModelConfig& config) {
  const std::string arch = family.gguf_arch ? family.gguf_arch(config) : family.gguf_archs.at(0);
  for (const ConfigKey& key : family.keys)
    if (!key.gguf.empty()) writer.set(arch + "." + key.gguf, gguf_value_of(key, field_json(key, config)));
  if (family.write_gguf_extra) family.write_gguf_extra(writer, config, arch);
}

uint64_t hash_family_keys(const Family& family, const ModelConfig& config, uint64_t hash) {
  for (const ConfigKey& key : family.keys) {
    if (key.effect == KeyEffect::None) continue;
    hash = fnv1a(hash, key.hf.data(), key.hf.size() + 1);  // the name and its terminator
    // The canonical JSON text of the value: ints, doubles (shortest round-trip form), booleans,
    // strings and lists each hash to their own bytes.
    const std::string text = field_json(key, config).dump();
    hash = fnv1a(hash, text.data(), text.size() + 1);
  }
  return hash;
}

const Family* family_by_model_type(const std::string& model_type) {
  for (const Family* f : all_families())
    for (const std::string& t : f->model_types)
      if (t == model_type) return f;
  return nullptr;
}

const Family* family_by_gguf_arch(const std::string& arch) {
  for (const Family* f : all_families())
    for (const std::string& a : f->gguf_archs)
      if (a == arch) return f;
  return nullptr;
}

const Family* family_by_name(const std::string& name) {
  for (const Family* f : all_families())
    if (f->name == name) return f;
  return nullptr;
}

const Family* find_family(ModelFamily id) {
  for (const Family* f : all_families())
    if (f->id == id) return f;
  return nullptr;
}

}  // namespace mb

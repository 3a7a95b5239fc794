// SPDX-License-Identifier: MIT
// Typed, bounded access to config.json keys, with messages that name the file and the key: the
// one reader of the model-level config (config.cc) and of each block's own section
// (model/blocks/*_config.cc).
#pragma once

#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

namespace mb {

class ConfigReader {
 public:
  ConfigReader(const nlohmann::json& object, std::string where) : object_(object), where_(std::move(where)) {}

  const std::string& where() const { return where_; }
  bool has(const char* key) const { return object_.contains(key) && !object_[key].is_null(); }
  const nlohmann::json& at(const char* key) const { return object_[key]; }

  int64_t positive_int(const char* key, int64_t max_value) const;
  int64_t positive_int_or(const char* key, int64_t fallback, int64_t max_value) const;
  bool boolean_or(const char* key, bool fallback) const;
  double positive_number_or(const char* key, double fallback) const;
  std::string string_or(const char* key, const std::string& fallback) const;
  int64_t positive_int_value(const std::string& key, const nlohmann::json& value, int64_t max_value) const;
  // A number that may also be written as Python's json module writes infinities ("Infinity",
  // which load_model_config turns into a string before parsing).
  double number_value(const nlohmann::json& value, const std::string& key) const;

 private:
  const nlohmann::json& object_;
  std::string where_;
};

inline constexpr int64_t kMaxDModel = 1 << 16;
inline constexpr int64_t kMaxLayers = 4096;
inline constexpr int64_t kMaxVocab = 1 << 24;

}  // namespace mb

// SPDX-License-Identifier: MIT
#include "tokenizer/pipeline_json.h"

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/json_text.h"
#include "tokenizer/utf8.h"

namespace mb::tok {

using nlohmann::json;

namespace {

std::string field_name(const std::string& source, const char* stage, const char* key) {
  return source + ": " + stage + " field '" + key + "'";
}

}  // namespace

std::string stage_type(const json& config, const std::string& source, const char* stage) {
  if (!config.is_object()) throw Error(source + ": " + stage + " must be an object or null");
  const auto it = config.find("type");
  if (it == config.end() || !it->is_string()) throw Error(source + ": " + stage + " has no string 'type'");
  return it->get<std::string>();
}

bool bool_field(const json& config, const char* key, bool fallback, const std::string& source,
                const char* stage) {
  const auto it = config.find(key);
  if (it == config.end() || it->is_null()) return fallback;
  if (!it->is_boolean()) throw Error(field_name(source, stage, key) + " must be a boolean");
  return it->get<bool>();
}

const json& array_field(const json& config, const char* key, const std::string& source, const char* stage) {
  const auto it = config.find(key);
  if (it == config.end() || !it->is_array()) {
    throw Error(source + ": " + stage + " Sequence needs an array '" + key + "'");
  }
  return *it;
}

std::string string_field(const json& config, const char* key, const std::string& source, const char* stage) {
  const auto it = config.find(key);
  if (it == config.end() || !it->is_string())
    throw Error(field_name(source, stage, key) + " must be a string");
  return it->get<std::string>();
}

char32_t char_field(const json& config, const char* key, const std::string& source, const char* stage) {
  const std::string text = string_field(config, key, source, stage);
  size_t pos = 0;
  const char32_t c = text.empty() ? 0 : next_code_point(text, pos);
  if (text.empty() || pos != text.size()) {
    throw Error(field_name(source, stage, key) + " must be a single character, got '" + text + "'");
  }
  return c;
}

size_t count_field(const json& config, const char* key, const std::string& source, const char* stage) {
  const auto it = config.find(key);
  if (it == config.end() || !it->is_number_unsigned()) {
    throw Error(field_name(source, stage, key) + " must be a non-negative integer");
  }
  return it->get<size_t>();
}

std::string string_pattern(const json& config, const std::string& source, const char* stage) {
  const auto it = config.find("pattern");
  if (it == config.end() || !it->is_object() || !it->contains("String") || !it->at("String").is_string()) {
    throw Error(source + ": " + stage +
                " Replace needs a {\"String\": ...} pattern (Regex patterns are not supported)");
  }
  std::string pattern = it->at("String").get<std::string>();
  if (pattern.empty()) throw Error(source + ": " + stage + " Replace has an empty pattern");
  return pattern;
}

MetaspaceOptions metaspace_options(const json& config, const std::string& source, const char* stage) {
  MetaspaceOptions options;
  options.replacement = char_field(config, "replacement", source, stage);
  options.split = bool_field(config, "split", true, source, stage);
  const auto scheme = config.find("prepend_scheme");
  if (scheme != config.end() && !scheme->is_null()) {
    const std::string name = scheme->is_string() ? scheme->get<std::string>() : json_excerpt(*scheme);
    if (name == "always") {
      options.prepend = PrependScheme::Always;
    } else if (name == "first") {
      options.prepend = PrependScheme::First;
    } else if (name == "never") {
      options.prepend = PrependScheme::Never;
    } else {
      throw Error(source + ": " + stage + " Metaspace has unknown prepend_scheme '" + name +
                  "' (expected always, first or never)");
    }
  }
  // add_prefix_space: true leaves the scheme as it is; false means never and, as in Hugging
  // Face, contradicts an explicit or default prepend_scheme other than never.
  if (!bool_field(config, "add_prefix_space", true, source, stage)) {
    if (options.prepend != PrependScheme::Never) {
      throw Error(source + ": " + stage +
                  " Metaspace has add_prefix_space false, which contradicts its prepend_scheme "
                  "(write prepend_scheme \"never\")");
    }
  }
  return options;
}

}  // namespace mb::tok

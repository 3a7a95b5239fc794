// SPDX-License-Identifier: MIT
#include "common/json_schema_validator.h"

#include <regex>
#include <string_view>

namespace mb::test {
namespace {

using nlohmann::json;

size_t code_points(const std::string& text) {
  size_t n = 0;
  for (char c : text)
    if ((static_cast<unsigned char>(c) & 0xC0) != 0x80) ++n;
  return n;
}

bool has_type(const json& value, const std::string& type) {
  if (type == "object") return value.is_object();
  if (type == "array") return value.is_array();
  if (type == "string") return value.is_string();
  if (type == "number") return value.is_number();
  if (type == "boolean") return value.is_boolean();
  if (type == "null") return value.is_null();
  if (type == "integer")
    return value.is_number_integer() || (value.is_number_float() && value.get<double>() == static_cast<double>(
                                                                                                static_cast<int64_t>(value.get<double>())));
  return false;
}

bool matches_format(const std::string& text, const std::string& format) {
  static const std::string date = "[0-9]{4}-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])";
  static const std::string time =
      "([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](\\.[0-9]+)?(Z|z|[+-]([01][0-9]|2[0-3]):[0-5][0-9])";
  if (format == "date") return std::regex_match(text, std::regex(date));
  if (format == "time") return std::regex_match(text, std::regex(time));
  if (format == "date-time") return std::regex_match(text, std::regex(date + "[Tt]" + time));
  if (format == "uuid")
    return std::regex_match(text, std::regex("[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"));
  return true;  // other formats are annotations
}

class Validator {
 public:
  explicit Validator(const json& root) : root_(root) {}

  std::string check(const json& value, const json& schema, const std::string& at, int depth) const {
    if (depth > 200) return at + ": the schema recurses past 200 levels here";
    if (schema.is_boolean()) return schema.get<bool>() ? "" : at + ": the schema false admits nothing";
    if (schema.value("nullable", false) && value.is_null()) return "";
    if (const auto it = schema.find("$ref"); it != schema.end()) {
      const std::string ref = it->get<std::string>();
      return check(value, root_.at(json::json_pointer(ref.substr(1))), at, depth + 1);
    }
    if (const auto it = schema.find("anyOf"); it != schema.end()) {
      for (const json& alternative : *it)
        if (check(value, alternative, at, depth + 1).empty()) return "";
      return at + ": " + value.dump() + " matches no anyOf alternative";
    }
    if (const auto it = schema.find("oneOf"); it != schema.end()) {
      int matched = 0;
      for (const json& alternative : *it) matched += check(value, alternative, at, depth + 1).empty();
      if (matched != 1) return at + ": " + value.dump() + " matches " + std::to_string(matched) + " oneOf alternatives";
      return "";
    }
    if (const auto it = schema.find("const"); it != schema.end() && value != *it)
      return at + ": " + value.dump() + " is not the const " + it->dump();
    if (const auto it = schema.find("enum"); it != schema.end()) {
      bool found = false;
      for (const json& option : *it) found = found || option == value;
      if (!found) return at + ": " + value.dump() + " is not in the enum";
    }
    if (const auto it = schema.find("type"); it != schema.end()) {
      bool ok = false;
      for (const json& type : it->is_array() ? *it : json::array({*it})) ok = ok || has_type(value, type.get<std::string>());
      if (!ok) return at + ": " + value.dump() + " is not of type " + it->dump();
    }
    if (value.is_object()) return check_object(value, schema, at, depth);
    if (value.is_array()) return check_array(value, schema, at, depth);
    if (value.is_string()) {
      const size_t length = code_points(value.get<std::string>());
      if (schema.contains("minLength") && length < schema.at("minLength").get<size_t>())
        return at + ": " + value.dump() + " is shorter than minLength";
      if (schema.contains("maxLength") && length > schema.at("maxLength").get<size_t>())
        return at + ": " + value.dump() + " is longer than maxLength";
      if (schema.contains("format") && !matches_format(value.get<std::string>(), schema.at("format")))
        return at + ": " + value.dump() + " is not a " + schema.at("format").get<std::string>();
    }
    return "";
  }

 private:
  std::string check_object(const json& value, const json& schema, const std::string& at, int depth) const {
    const json properties = schema.value("properties", json::object());
    for (const json& name : schema.value("required", json::array()))
      if (!value.contains(name.get<std::string>())) return at + ": the required member " + name.dump() + " is missing";
    for (const auto& [key, member] : value.items()) {
      const std::string member_at = at + "/" + key;
      if (properties.contains(key)) {
        if (std::string e = check(member, properties.at(key), member_at, depth + 1); !e.empty()) return e;
      } else if (schema.contains("additionalProperties")) {
        if (std::string e = check(member, schema.at("additionalProperties"), member_at, depth + 1); !e.empty())
          return e;
      }
    }
    return "";
  }

  std::string check_array(const json& value, const json& schema, const std::string& at, int depth) const {
    if (schema.contains("minItems") && value.size() < schema.at("minItems").get<size_t>())
      return at + ": " + std::to_string(value.size()) + " items, fewer than minItems";
    if (schema.contains("maxItems") && value.size() > schema.at("maxItems").get<size_t>())
      return at + ": " + std::to_string(value.size()) + " items, more than maxItems";
    if (const auto it = schema.find("items"); it != schema.end())
      for (size_t i = 0; i < value.size(); ++i)
        if (std::string e = check(value[i], *it, at + "/" + std::to_string(i), depth + 1); !e.empty()) return e;
    return "";
  }

  const json& root_;
};

}  // namespace

std::string json_schema_violation(const nlohmann::json& value, const nlohmann::json& schema) {
  return Validator(schema).check(value, schema, "", 0);
}

}  // namespace mb::test

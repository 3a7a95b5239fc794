// SPDX-License-Identifier: MIT
// JSON Schema -> GBNF, after llama.cpp's json-schema-to-grammar: one rule per object, array,
// referenced definition and bounded string, sharing fixed primitive rules (space, string, number,
// value...). Every value rule ends in `space`, so a sequence never has to think about blanks.
#include "engine/grammar/json_schema.h"

#include <algorithm>
#include <map>
#include <set>
#include <vector>

#include "core/error.h"
#include "core/json_text.h"
#include "engine/grammar/json_schema_rules.h"

namespace mb {
namespace {

using ojson = nlohmann::ordered_json;
namespace rules = json_schema_rules;

// Assertion keywords outside the subset: ignoring any of them would let through values the
// schema forbids, so each is refused by name.
const std::set<std::string>& refused_keywords() {
  static const std::set<std::string> names = {
      "pattern",           "minimum",           "maximum",          "exclusiveMinimum",
      "exclusiveMaximum",  "multipleOf",        "not",              "if",
      "then",              "else",              "allOf",            "patternProperties",
      "propertyNames",     "dependentRequired", "dependentSchemas", "dependencies",
      "minProperties",     "maxProperties",     "contains",         "minContains",
      "maxContains",       "prefixItems",       "additionalItems",  "unevaluatedProperties",
      "unevaluatedItems",  "$dynamicRef",       "$recursiveRef",    "contentSchema"};
  return names;
}

// The keywords that assert something about a value, which may not sit beside $ref or anyOf
// (their conjunction would need a grammar intersection).
const std::set<std::string>& assertion_keywords() {
  static const std::set<std::string> names = {
      "type",  "enum",     "const",     "properties", "required", "additionalProperties",
      "items", "minItems", "maxItems",  "minLength",  "maxLength", "format",
      "$ref",  "anyOf",    "oneOf",     "nullable"};
  return names;
}

std::string escape_pointer_token(const std::string& key) {
  std::string out;
  for (char c : key) {
    if (c == '~')
      out += "~0";
    else if (c == '/')
      out += "~1";
    else
      out += c;
  }
  return out;
}

class Converter {
 public:
  explicit Converter(const ojson& root) : root_(root) {}

  std::string run() {
    refs_[""] = "root";
    out_.add_rule("root", "");  // first in the text; its body is set below
    std::vector<std::string> chain = {""};
    const std::string expr = visit(root_, "", "root", 0, chain);
    out_.set_rule("root", expr);
    return out_.text();
  }

 private:
  [[noreturn]] void fail(const std::string& pointer, const std::string& problem) const {
    throw Error("JSON schema #" + pointer + ": " + problem);
  }

  // The expression for a value matching `schema` (a rule name or a parenthesised group). `chain`
  // lists the references entered since the last "{" or "[": meeting one of them again would be
  // a rule that reaches itself without consuming anything.
  std::string visit(const ojson& schema, const std::string& ptr, const std::string& name, int depth,
                    std::vector<std::string>& chain) {
    if (depth > JsonSchemaLimits::kMaxDepth) fail(ptr, "sub-schemas nest deeper than the limit");
    if (schema.is_boolean()) {
      if (!schema.get<bool>()) fail(ptr, "the schema false admits no value");
      return out_.primitive("value");
    }
    if (!schema.is_object()) fail(ptr, "a schema must be an object or a boolean, got " + excerpt(schema));
    for (const auto& [key, value] : schema.items()) {
      if (refused_keywords().count(key)) fail(ptr, key + " is not supported (it would be ignored, and the output could break it)");
      if (key == "uniqueItems" && !(value.is_boolean() && !value.get<bool>()))
        fail(ptr, "uniqueItems is not supported (it would be ignored, and the output could break it)");
    }
    if (const auto it = schema.find("nullable"); it != schema.end()) {
      if (!it->is_boolean()) fail(ptr + "/nullable", "must be a boolean, got " + excerpt(*it));
      if (it->get<bool>()) {
        ojson inner = schema;
        inner.erase("nullable");
        const std::string expr = visit(inner, ptr, name, depth + 1, chain);
        return "( " + expr + " | " + out_.primitive("null") + " )";
      }
    }
    if (schema.contains("$ref")) return visit_ref(schema, ptr, name, depth, chain);
    for (const char* key : {"anyOf", "oneOf"})
      if (schema.contains(key)) return visit_any_of(schema, key, ptr, name, depth, chain);
    if (schema.contains("const")) return literal_value(schema, schema.at("const"), ptr + "/const");
    if (schema.contains("enum")) return visit_enum(schema, ptr, name);
    const std::vector<std::string> types = read_types(schema, ptr);
    std::vector<std::string> alternatives;
    for (const std::string& type : types) alternatives.push_back(visit_type(schema, type, ptr, name, depth, chain));
    if (alternatives.size() == 1) return alternatives[0];
    return out_.add_rule(name, join(alternatives, " | "));
  }

  void refuse_siblings(const ojson& schema, const std::string& key, const std::string& ptr) const {
    for (const auto& [sibling, value] : schema.items())
      if (sibling != key && assertion_keywords().count(sibling))
        fail(ptr, sibling + " beside " + key + " is not supported (put it inside the " + key + ")");
  }

  std::string visit_ref(const ojson& schema, const std::string& ptr, const std::string& name, int depth,
                        std::vector<std::string>& chain) {
    refuse_siblings(schema, "$ref", ptr);
    const ojson& ref = schema.at("$ref");
    if (!ref.is_string()) fail(ptr + "/$ref", "must be a string, got " + excerpt(ref));
    const std::string text = ref.get<std::string>();
    if (text.empty() || text[0] != '#')
      fail(ptr + "/$ref", "only references inside the schema (\"#\", \"#/$defs/NAME\") are supported, got " +
                              excerpt(ref));
    const std::string target_ptr = text.substr(1);
    if (std::find(chain.begin(), chain.end(), target_ptr) != chain.end())
      fail(ptr + "/$ref", "the reference " + excerpt(ref) +
                              " reaches itself without an object or array between (the schema has no finite value)");
    if (const auto it = refs_.find(target_ptr); it != refs_.end()) return it->second;
    const ojson& target = resolve(target_ptr, ptr + "/$ref");
    const std::string rule = out_.add_rule(rules::name_from_pointer(target_ptr, name), "");
    refs_[target_ptr] = rule;
    chain.push_back(target_ptr);
    const std::string expr = visit(target, target_ptr, rule, depth + 1, chain);
    chain.pop_back();
    out_.set_rule(rule, expr);
    return rule;
  }

  const ojson& resolve(const std::string& pointer, const std::string& ptr) const {
    const ojson* node = &root_;
    size_t pos = 0;
    while (pos < pointer.size()) {
      if (pointer[pos] != '/') fail(ptr, "the reference #" + pointer + " is not a JSON pointer");
      const size_t next = std::min(pointer.find('/', pos + 1), pointer.size());
      std::string token;
      for (size_t i = pos + 1; i < next; ++i) {
        if (pointer[i] == '~' && i + 1 < next && (pointer[i + 1] == '0' || pointer[i + 1] == '1')) {
          token += pointer[i + 1] == '0' ? '~' : '/';
          ++i;
        } else {
          token += pointer[i];
        }
      }
      if (node->is_object() && node->contains(token)) {
        node = &node->at(token);
      } else if (node->is_array() && !token.empty() &&
                 std::all_of(token.begin(), token.end(), [](char c) { return c >= '0' && c <= '9'; }) &&
                 token.size() < 10 && std::stoul(token) < node->size()) {
        node = &(*node)[std::stoul(token)];
      } else {
        fail(ptr, "the reference #" + pointer + " names nothing in the schema");
      }
      pos = next;
    }
    return *node;
  }

  std::string visit_any_of(const ojson& schema, const char* key, const std::string& ptr, const std::string& name,
                           int depth, std::vector<std::string>& chain) {
    refuse_siblings(schema, key, ptr);
    const ojson& list = schema.at(key);
    const std::string list_ptr = ptr + "/" + key;
    if (!list.is_array() || list.empty()) fail(list_ptr, "must be a non-empty list of schemas, got " + excerpt(list));
    std::vector<std::string> alternatives;
    for (size_t i = 0; i < list.size(); ++i)
      alternatives.push_back(
          visit(list[i], list_ptr + "/" + std::to_string(i), name + "-" + std::to_string(i), depth + 1, chain));
    return out_.add_rule(name, join(alternatives, " | "));
  }

  std::string literal_value(const ojson& schema, const ojson& value, const std::string& ptr) {
    if (const auto it = schema.find("type"); it != schema.end()) {
      const std::vector<std::string> types = read_types(schema, ptr);
      if (!rules::value_has_type(value, types)) fail(ptr, excerpt(value) + " does not have the schema's type");
    }
    return rules::gbnf_literal(value.dump()) + " " + out_.primitive("space");
  }

  std::string visit_enum(const ojson& schema, const std::string& ptr, const std::string& name) {
    const ojson& list = schema.at("enum");
    if (!list.is_array() || list.empty()) fail(ptr + "/enum", "must be a non-empty list, got " + excerpt(list));
    std::vector<std::string> types;
    if (schema.contains("type")) types = read_types(schema, ptr);
    std::vector<std::string> alternatives;
    for (const ojson& value : list)
      if (types.empty() || rules::value_has_type(value, types))
        alternatives.push_back(rules::gbnf_literal(value.dump()) + " " + out_.primitive("space"));
    if (alternatives.empty()) fail(ptr + "/enum", "no value has the schema's type");
    return out_.add_rule(name, join(alternatives, " | "));
  }

  std::vector<std::string> read_types(const ojson& schema, const std::string& ptr) const {
    static const std::set<std::string> known = {"object", "array", "string", "number", "integer", "boolean", "null"};
    const auto it = schema.find("type");
    if (it == schema.end()) {
      // llama.cpp's reading: a schema without a type is the type its keywords describe.
      if (schema.contains("properties") || schema.contains("additionalProperties") || schema.contains("required"))
        return {"object"};
      if (schema.contains("items") || schema.contains("minItems") || schema.contains("maxItems")) return {"array"};
      if (schema.contains("minLength") || schema.contains("maxLength") || schema.contains("format")) return {"string"};
      return {"any"};
    }
    std::vector<std::string> types;
    if (it->is_string()) {
      types.push_back(it->get<std::string>());
    } else if (it->is_array() && !it->empty()) {
      for (const ojson& item : *it) {
        if (!item.is_string()) fail(ptr + "/type", "must be a type name or a list of them, got " + excerpt(*it));
        types.push_back(item.get<std::string>());
      }
    } else {
      fail(ptr + "/type", "must be a type name or a non-empty list of them, got " + excerpt(*it));
    }
    for (const std::string& type : types)
      if (!known.count(type)) fail(ptr + "/type", "unknown type " + excerpt(ojson(type)));
    return types;
  }

  std::string visit_type(const ojson& schema, const std::string& type, const std::string& ptr,
                         const std::string& name, int depth, std::vector<std::string>& chain) {
    if (type == "any") return out_.primitive("value");
    if (type == "object") return visit_object(schema, ptr, name, depth);
    if (type == "array") return visit_array(schema, ptr, name, depth);
    if (type == "string") return visit_string(schema, ptr, name);
    (void)chain;
    return out_.primitive(type);  // number, integer, boolean, null
  }

  std::string visit_object(const ojson& schema, const std::string& ptr, const std::string& name, int depth) {
    std::vector<std::pair<std::string, std::string>> members;  // key, "key": value expression
    std::set<std::string> listed;
    if (const auto it = schema.find("properties"); it != schema.end()) {
      if (!it->is_object()) fail(ptr + "/properties", "must be an object, got " + excerpt(*it));
      for (const auto& [key, sub] : it->items()) {
        std::vector<std::string> fresh;
        const std::string sub_ptr = ptr + "/properties/" + escape_pointer_token(key);
        const std::string value = visit(sub, sub_ptr, rules::child_name(name, key), depth + 1, fresh);
        members.emplace_back(key, rules::gbnf_literal(ojson(key).dump()) + " " + out_.primitive("space") +
                                      " \":\" " + out_.primitive("space") + " " + value);
        listed.insert(key);
      }
    }
    std::set<std::string> required;
    if (const auto it = schema.find("required"); it != schema.end()) {
      if (!it->is_array()) fail(ptr + "/required", "must be a list of names, got " + excerpt(*it));
      for (const ojson& key : *it) {
        if (!key.is_string()) fail(ptr + "/required", "must be a list of names, got the item " + excerpt(key));
        if (!listed.count(key.get<std::string>()))
          fail(ptr + "/required", excerpt(key) + " is required but not in properties (not supported)");
        required.insert(key.get<std::string>());
      }
    }
    std::string extra;  // one further member, or empty where none may follow
    if (const auto it = schema.find("additionalProperties"); it == schema.end() || *it != ojson(false)) {
      std::string value;
      if (it != schema.end() && !it->is_boolean()) {
        std::vector<std::string> fresh;
        value = visit(*it, ptr + "/additionalProperties", name + "-additional", depth + 1, fresh);
      } else {
        value = out_.primitive("value");
      }
      const std::string key_rule = out_.add_rule(name + "-additional-key", rules::key_excluding(out_, listed, name));
      extra = out_.add_rule(name + "-additional-kv",
                            key_rule + " \":\" " + out_.primitive("space") + " " + value);
    }
    std::vector<std::string> required_members, optional_members;
    for (const auto& [key, member] : members)
      (required.count(key) ? required_members : optional_members).push_back(member);
    return out_.add_rule(name, rules::object_body(out_, name, required_members, optional_members, extra));
  }

  int64_t read_count(const ojson& schema, const char* key, int64_t fallback, const std::string& ptr) const {
    const auto it = schema.find(key);
    if (it == schema.end()) return fallback;
    if (!it->is_number_integer() || it->get<int64_t>() < 0)
      fail(ptr + "/" + key, "must be a non-negative integer, got " + excerpt(*it));
    if (it->get<int64_t>() > JsonSchemaLimits::kMaxRepetition)
      fail(ptr + "/" + key, "is " + excerpt(*it) + ", more than the " +
                                std::to_string(JsonSchemaLimits::kMaxRepetition) + " supported");
    return it->get<int64_t>();
  }

  std::string visit_array(const ojson& schema, const std::string& ptr, const std::string& name, int depth) {
    std::string item;
    if (const auto it = schema.find("items"); it != schema.end()) {
      if (it->is_array()) fail(ptr + "/items", "a list of schemas (a tuple) is not supported");
      std::vector<std::string> fresh;
      item = visit(*it, ptr + "/items", name + "-item", depth + 1, fresh);
    } else {
      item = out_.primitive("value");
    }
    const int64_t min = read_count(schema, "minItems", 0, ptr);
    const int64_t max = read_count(schema, "maxItems", -1, ptr);
    if (max >= 0 && max < min) fail(ptr, "maxItems is less than minItems");
    const std::string list = rules::repeat_separated(item, "\",\" " + out_.primitive("space"), min, max);
    std::string body = "\"[\" " + out_.primitive("space") + " ";
    if (!list.empty()) body += list + " ";
    return out_.add_rule(name, body + "\"]\" " + out_.primitive("space"));
  }

  std::string visit_string(const ojson& schema, const std::string& ptr, const std::string& name) {
    const int64_t min = read_count(schema, "minLength", 0, ptr);
    const int64_t max = read_count(schema, "maxLength", -1, ptr);
    if (max >= 0 && max < min) fail(ptr, "maxLength is less than minLength");
    if (const auto it = schema.find("format"); it != schema.end()) {
      if (!it->is_string()) fail(ptr + "/format", "must be a string, got " + excerpt(*it));
      const std::string format = it->get<std::string>();
      if (rules::is_string_format(format)) {
        if (schema.contains("minLength") || schema.contains("maxLength"))
          fail(ptr, "minLength or maxLength beside format " + format + " is not supported");
        return out_.primitive(format + "-string");
      }
      // Any other format is an annotation (JSON Schema's default): a plain string.
    }
    if (min == 0 && max < 0) return out_.primitive("string");
    const std::string chars = rules::repeat_plain(out_.primitive("char"), min, max);
    return out_.add_rule(name, "\"\\\"\" " + chars + " \"\\\"\" " + out_.primitive("space"));
  }

  static std::string join(const std::vector<std::string>& parts, const std::string& separator) {
    std::string out;
    for (size_t i = 0; i < parts.size(); ++i) out += (i ? separator : "") + parts[i];
    return out;
  }

  static std::string excerpt(const ojson& value) { return json_excerpt(nlohmann::json::parse(value.dump())); }

  const ojson& root_;
  rules::RuleSet out_;
  std::map<std::string, std::string> refs_;  // pointer -> its rule
};

void check_depth(const nlohmann::json& value, int depth) {
  if (depth > JsonSchemaLimits::kMaxDepth)
    throw Error("the JSON schema nests arrays and objects deeper than " + std::to_string(JsonSchemaLimits::kMaxDepth));
  if (value.is_structured())
    for (const auto& item : value) check_depth(item, depth + 1);
}

}  // namespace

std::string json_schema_to_gbnf(const nlohmann::ordered_json& schema) { return Converter(schema).run(); }

std::string json_schema_to_gbnf(const nlohmann::json& schema) {
  check_depth(schema, 0);
  nlohmann::ordered_json ordered;
  try {
    ordered = nlohmann::ordered_json::parse(schema.dump());
  } catch (const nlohmann::json::exception& e) {
    throw Error(std::string("the JSON schema cannot be read: ") + e.what());
  }
  return json_schema_to_gbnf(ordered);
}

std::string json_schema_text_to_gbnf(std::string_view text, const std::string& source) {
  if (text.size() > JsonSchemaLimits::kMaxTextBytes)
    throw Error(source + " is " + std::to_string(text.size()) + " bytes, more than the " +
                std::to_string(JsonSchemaLimits::kMaxTextBytes) + " allowed");
  // The bounded parser checks depth, numbers and UTF-8; the ordered parse of the same text then
  // keeps the key order, which nlohmann::json's sorted objects lose.
  parse_json_text(text, source, JsonSchemaLimits::kMaxDepth);
  return json_schema_to_gbnf(nlohmann::ordered_json::parse(text));
}

std::string json_object_gbnf() {
  rules::RuleSet out;
  out.add_rule("root", out.primitive("object"));
  return out.text();
}

}  // namespace mb

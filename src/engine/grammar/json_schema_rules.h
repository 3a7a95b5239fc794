// SPDX-License-Identifier: MIT
// The pieces json_schema.cc writes its GBNF with: a bounded set of named rules, the primitive
// JSON rules, literals, repetitions and the object layout. Internal to the converter.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

namespace mb::json_schema_rules {

class RuleSet {
 public:
  // Adds a rule named after `name` (made unique with a numeric suffix) and returns its name.
  std::string add_rule(const std::string& name, const std::string& body);
  void set_rule(const std::string& name, const std::string& body);
  // The name of a primitive rule (space, char, string, number, integer, boolean, null, value,
  // object, array, date-string, time-string, date-time-string, uuid-string), added with the
  // rules it needs on first use.
  std::string primitive(const std::string& name);
  // The grammar text, rules in the order added. Throws mb::Error past JsonSchemaLimits.
  std::string text() const;

 private:
  void check_size() const;
  std::vector<std::string> order_;
  std::map<std::string, std::string> bodies_;
  size_t bytes_ = 0;
};

// A GBNF literal ("...") for the UTF-8 text `bytes`.
std::string gbnf_literal(const std::string& bytes);
// A rule name for a definition at `pointer` ("/$defs/node" -> "node"); `fallback` if none.
std::string name_from_pointer(const std::string& pointer, const std::string& fallback);
// The name for the value of property `key` of the rule `parent`.
std::string child_name(const std::string& parent, const std::string& key);
bool value_has_type(const nlohmann::ordered_json& value, const std::vector<std::string>& types);
bool is_string_format(const std::string& format);

// `item` min..max times (max < 0: unbounded), nothing between; "" when max == 0.
std::string repeat_plain(const std::string& item, int64_t min, int64_t max);
// The same with `separator` between items.
std::string repeat_separated(const std::string& item, const std::string& separator, int64_t min, int64_t max);

// The body of a rule matching a quoted object key (with its trailing space) that is none of
// `listed`, written without escapes so that no escape can spell a listed key.
std::string key_excluding(RuleSet& out, const std::set<std::string>& listed, const std::string& name);

// An object's rule body: the required members in order, then any subset of the optional ones in
// order, then any number of `extra` members (none where `extra` is empty), commas between.
std::string object_body(RuleSet& out, const std::string& name, const std::vector<std::string>& required,
                        const std::vector<std::string>& optional, const std::string& extra);

}  // namespace mb::json_schema_rules

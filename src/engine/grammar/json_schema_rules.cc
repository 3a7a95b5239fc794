// SPDX-License-Identifier: MIT
#include "engine/grammar/json_schema_rules.h"

#include <cstdio>

#include "core/error.h"
#include "engine/grammar/json_schema.h"

namespace mb::json_schema_rules {
namespace {

struct Primitive {
  const char* name;
  const char* body;
  std::vector<const char*> needs;
};

// JSON's own grammar, as llama.cpp's converter writes it, with every unbounded run that a model
// could stretch without end (blanks, digits) bounded. A \u escape never names a lone surrogate,
// which JSON parsers refuse.
const std::vector<Primitive>& primitives() {
  static const std::vector<Primitive> list = {
      {"space", R"(( " " | "\n" [ \t]{0,20} )?)", {}},
      {"hex", R"([0-9a-fA-F])", {}},
      {"unicode-escape", R"([0-9a-cA-Ce-fE-F] hex{3} | [dD] [0-7] hex{2})", {"hex"}},
      {"char", R"([^"\\\x7F\x00-\x1F] | [\\] ( ["\\/bfnrt] | "u" unicode-escape ))", {"unicode-escape"}},
      {"key-char", R"([^"\\\x7F\x00-\x1F])", {}},
      {"string", R"("\"" char* "\"" space)", {"char", "space"}},
      {"integral-part", R"([0] | [1-9] [0-9]{0,15})", {}},
      {"number", R"("-"? integral-part ( "." [0-9]{1,16} )? ( [eE] [-+]? [0-9]{1,2} )? space)",
       {"integral-part", "space"}},
      {"integer", R"("-"? integral-part space)", {"integral-part", "space"}},
      {"boolean", R"(( "true" | "false" ) space)", {"space"}},
      {"null", R"("null" space)", {"space"}},
      {"value", R"(object | array | string | number | boolean | null)",
       {"object", "array", "string", "number", "boolean", "null"}},
      {"object", R"("{" space ( string ":" space value ( "," space string ":" space value )* )? "}" space)",
       {"space", "string", "value"}},
      {"array", R"("[" space ( value ( "," space value )* )? "]" space)", {"space", "value"}},
      {"date", R"([0-9]{4} "-" ( "0" [1-9] | "1" [0-2] ) "-" ( "0" [1-9] | [1-2] [0-9] | "3" [0-1] ))", {}},
      {"time",
       R"(( [01] [0-9] | "2" [0-3] ) ":" [0-5] [0-9] ":" [0-5] [0-9] ( "." [0-9]{1,6} )? ( "Z" | [+-] ( [01] [0-9] | "2" [0-3] ) ":" [0-5] [0-9] ))",
       {}},
      {"date-string", R"("\"" date "\"" space)", {"date", "space"}},
      {"time-string", R"("\"" time "\"" space)", {"time", "space"}},
      {"date-time-string", R"("\"" date "T" time "\"" space)", {"date", "time", "space"}},
      {"uuid-string", R"("\"" hex{8} "-" hex{4} "-" hex{4} "-" hex{4} "-" hex{12} "\"" space)", {"hex", "space"}},
  };
  return list;
}

const Primitive* find_primitive(const std::string& name) {
  for (const Primitive& p : primitives())
    if (name == p.name) return &p;
  return nullptr;
}

std::string sanitize(const std::string& text) {
  std::string out;
  for (char c : text) {
    const bool keep = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
    if (keep)
      out += c;
    else if (!out.empty() && out.back() != '-')
      out += '-';
    if (out.size() >= 24) break;
  }
  while (!out.empty() && out.back() == '-') out.pop_back();
  return out;
}

std::vector<uint32_t> decode_utf8(const std::string& text) {
  std::vector<uint32_t> out;
  for (size_t i = 0; i < text.size();) {
    const auto b = static_cast<unsigned char>(text[i]);
    const int length = b < 0x80 ? 1 : (b >> 5) == 6 ? 2 : (b >> 4) == 14 ? 3 : (b >> 3) == 30 ? 4 : 0;
    if (length == 0 || i + length > text.size()) throw Error("a property name of the JSON schema is not UTF-8");
    uint32_t c = length == 1 ? b : b & (0x7F >> length);
    for (int k = 1; k < length; ++k) c = (c << 6) | (static_cast<unsigned char>(text[i + k]) & 0x3F);
    out.push_back(c);
    i += length;
  }
  return out;
}

// One code point inside a GBNF character class.
std::string class_char(uint32_t c) {
  if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')) return std::string(1, char(c));
  char buffer[16];
  if (c < 0x100)
    std::snprintf(buffer, sizeof buffer, "\\x%02X", c);
  else if (c < 0x10000)
    std::snprintf(buffer, sizeof buffer, "\\u%04X", c);
  else
    std::snprintf(buffer, sizeof buffer, "\\U%08X", c);
  return buffer;
}

struct TrieNode {
  std::map<uint32_t, size_t> children;  // code point -> node index
  bool is_key = false;
};

}  // namespace

std::string RuleSet::add_rule(const std::string& name, const std::string& body) {
  std::string base = sanitize(name);
  if (base.empty()) base = "rule";
  std::string unique = base;
  for (int n = 1; bodies_.count(unique) || find_primitive(unique); ++n) unique = base + "-" + std::to_string(n);
  order_.push_back(unique);
  bodies_[unique] = body;
  bytes_ += unique.size() + body.size() + 6;
  check_size();
  return unique;
}

void RuleSet::set_rule(const std::string& name, const std::string& body) {
  std::string& old = bodies_.at(name);
  bytes_ += body.size();
  bytes_ -= old.size();
  old = body;
  check_size();
}

std::string RuleSet::primitive(const std::string& name) {
  const Primitive* p = find_primitive(name);
  if (!p) throw Error("internal: no primitive JSON rule " + name);
  if (!bodies_.count(name)) {
    order_.push_back(name);
    bodies_[name] = p->body;
    bytes_ += name.size() + std::string(p->body).size() + 6;
    for (const char* need : p->needs) primitive(need);
  }
  return name;
}

void RuleSet::check_size() const {
  if (order_.size() > JsonSchemaLimits::kMaxRules)
    throw Error("the JSON schema needs more than " + std::to_string(JsonSchemaLimits::kMaxRules) + " grammar rules");
  if (bytes_ > JsonSchemaLimits::kMaxGrammarBytes)
    throw Error("the JSON schema makes a grammar of more than " + std::to_string(JsonSchemaLimits::kMaxGrammarBytes) +
                " bytes");
}

std::string RuleSet::text() const {
  std::string out;
  out.reserve(bytes_);
  for (const std::string& name : order_) out += name + " ::= " + bodies_.at(name) + "\n";
  return out;
}

std::string gbnf_literal(const std::string& bytes) {
  std::string out = "\"";
  for (char ch : bytes) {
    const auto c = static_cast<unsigned char>(ch);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += ch;
    } else if (c < 0x20 || c == 0x7F) {
      char buffer[8];
      std::snprintf(buffer, sizeof buffer, "\\x%02X", c);
      out += buffer;
    } else {
      out += ch;
    }
  }
  return out + "\"";
}

std::string name_from_pointer(const std::string& pointer, const std::string& fallback) {
  const size_t slash = pointer.rfind('/');
  const std::string last = sanitize(slash == std::string::npos ? pointer : pointer.substr(slash + 1));
  return last.empty() ? fallback : "ref-" + last;
}

std::string child_name(const std::string& parent, const std::string& key) {
  const std::string part = sanitize(key);
  std::string name = parent.size() > 40 ? parent.substr(0, 40) : parent;
  return name + "-" + (part.empty() ? "member" : part);
}

bool value_has_type(const nlohmann::ordered_json& value, const std::vector<std::string>& types) {
  for (const std::string& type : types) {
    if ((type == "object" && value.is_object()) || (type == "array" && value.is_array()) ||
        (type == "string" && value.is_string()) || (type == "number" && value.is_number()) ||
        (type == "boolean" && value.is_boolean()) || (type == "null" && value.is_null()) ||
        (type == "integer" && value.is_number_integer()))
      return true;
  }
  return false;
}

bool is_string_format(const std::string& format) {
  return format == "date" || format == "time" || format == "date-time" || format == "uuid";
}

std::string repeat_plain(const std::string& item, int64_t min, int64_t max) {
  if (max == 0) return "";
  if (max < 0) {
    if (min == 0) return item + "*";
    if (min == 1) return item + "+";
    return item + "{" + std::to_string(min) + ",}";
  }
  if (min == max) return min == 1 ? item : item + "{" + std::to_string(min) + "}";
  if (min == 0 && max == 1) return item + "?";
  return item + "{" + std::to_string(min) + "," + std::to_string(max) + "}";
}

std::string repeat_separated(const std::string& item, const std::string& separator, int64_t min, int64_t max) {
  if (max == 0) return "";
  const std::string rest =
      repeat_plain("( " + separator + " " + item + " )", min > 0 ? min - 1 : 0, max < 0 ? -1 : max - 1);
  const std::string list = item + (rest.empty() ? "" : " " + rest);
  return min == 0 ? "( " + list + " )?" : list;
}

std::string key_excluding(RuleSet& out, const std::set<std::string>& listed, const std::string& name) {
  const std::string space = out.primitive("space");
  if (listed.empty()) return out.primitive("string");
  std::vector<TrieNode> trie(1);
  for (const std::string& key : listed) {
    size_t node = 0;
    for (uint32_t c : decode_utf8(key)) {
      auto it = trie[node].children.find(c);
      if (it == trie[node].children.end()) {
        trie.push_back({});
        it = trie[node].children.emplace(c, trie.size() - 1).first;
      }
      node = it->second;
    }
    trie[node].is_key = true;
  }
  // Node n's rule: the rest of a key that has reached n, up to the closing quote. It may stop
  // there unless n ends a listed key; a character no listed key continues with frees the rest.
  const std::string key_char = out.primitive("key-char");
  std::vector<std::string> node_rules(trie.size());
  for (size_t n = 0; n < trie.size(); ++n) node_rules[n] = out.add_rule(name + "-key", "");
  for (size_t n = 0; n < trie.size(); ++n) {
    std::string body = "( ";
    std::string others = "[^\"\\\\\\x7F\\x00-\\x1F";
    for (const auto& [c, child] : trie[n].children) {
      body += "[" + class_char(c) + "] " + node_rules[child] + " | ";
      others += class_char(c);
    }
    body += others + "] " + key_char + "* )" + (trie[n].is_key ? "" : "?");
    out.set_rule(node_rules[n], body);
  }
  return "\"\\\"\" " + node_rules[0] + " \"\\\"\" " + space;
}

std::string object_body(RuleSet& out, const std::string& name, const std::vector<std::string>& required,
                        const std::vector<std::string>& optional, const std::string& extra) {
  const std::string space = out.primitive("space");
  const std::string separator = "\",\" " + space;
  // tails[i]: what may follow once the members before optional[i] are written.
  std::vector<std::string> tails(optional.size() + 1);
  if (!extra.empty()) tails.back() = "( " + separator + " " + extra + " )*";
  // Without required members the object starts at any optional one, so tails[0] is never used.
  const size_t first_tail = required.empty() ? 1 : 0;
  for (size_t i = optional.size(); i-- > first_tail;) {
    const std::string body = "( " + separator + " " + optional[i] + " )?" +
                             (tails[i + 1].empty() ? "" : " " + tails[i + 1]);
    tails[i] = optional.size() - i > 1 ? out.add_rule(name + "-tail", body) : body;
  }
  std::string body = "\"{\" " + space + " ";
  if (!required.empty()) {
    for (size_t i = 0; i < required.size(); ++i) body += (i ? separator + " " : "") + required[i] + " ";
    if (!tails[0].empty()) body += tails[0] + " ";
  } else if (!optional.empty() || !extra.empty()) {
    std::vector<std::string> firsts;
    for (size_t i = 0; i < optional.size(); ++i)
      firsts.push_back(optional[i] + (tails[i + 1].empty() ? "" : " " + tails[i + 1]));
    if (!extra.empty()) firsts.push_back(extra + " " + tails.back());
    body += "(";
    for (size_t i = 0; i < firsts.size(); ++i) body += (i ? " | " : " ") + firsts[i];
    body += " )? ";
  }
  return body + "\"}\" " + space;
}

}  // namespace mb::json_schema_rules

// SPDX-License-Identifier: MIT
#include "server/tool_call_grammar.h"

#include <cctype>
#include <set>

#include "core/error.h"
#include "engine/grammar/json_schema.h"

namespace mb::server {

namespace {

bool is_rule_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_';
}

// A GBNF literal for `text`: quotes, backslashes and control characters escaped.
std::string literal(const std::string& text) {
  std::string out = "\"";
  for (char c : text) {
    if (c == '"' || c == '\\')
      out += std::string("\\") + c;
    else if (c == '\n')
      out += "\\n";
    else if (c == '\r')
      out += "\\r";
    else if (c == '\t')
      out += "\\t";
    else
      out += c;
  }
  return out + "\"";
}

// The grammar of one function's arguments (a JSON object), its rules prefixed with `prefix`; its
// start rule is `prefix` + "root".
std::string arguments_grammar(const ToolFunction& function, const std::string& prefix) {
  std::string grammar;
  if (function.parameters.is_object() && !function.parameters.empty()) {
    try {
      grammar = json_schema_to_gbnf(function.parameters);
    } catch (const Error&) {
      // A schema keyword the converter refuses: the call is still forced, its arguments free.
      grammar.clear();
    }
  }
  if (grammar.empty()) grammar = json_object_gbnf();
  return prefix_gbnf_rules(grammar, prefix);
}

// The XML form's parameters of one function: where the schema lists properties, its required
// ones first, once each in the schema's order, then any of the others in any order (the parser
// takes them as a JSON object); any names where it lists none.
std::string xml_parameters_grammar(const ToolFunction& function, const std::string& prefix) {
  const auto parameter = [](const std::string& name) {
    return literal("<parameter=" + name + ">\n") + " xml-value \"\\n</parameter>\\n\"";
  };
  const nlohmann::json* properties = nullptr;
  if (function.parameters.is_object()) {
    auto it = function.parameters.find("properties");
    if (it != function.parameters.end() && it->is_object() && !it->empty()) properties = &*it;
  }
  if (!properties)
    return prefix + "root ::= (\"<parameter=\" [a-zA-Z0-9_.-]+ \">\\n\" xml-value \"\\n</parameter>\\n\")*\n";
  std::set<std::string> required;
  std::string sequence;
  if (auto it = function.parameters.find("required"); it != function.parameters.end() && it->is_array()) {
    for (const auto& name : *it) {
      if (!name.is_string() || !properties->contains(name.get<std::string>())) continue;
      if (!required.insert(name.get<std::string>()).second) continue;
      sequence += (sequence.empty() ? "" : " ") + parameter(name.get<std::string>());
    }
  }
  std::string optional;
  for (const auto& [name, schema] : properties->items())
    if (!required.count(name)) optional += (optional.empty() ? "" : " | ") + parameter(name);
  std::string body = sequence;
  if (!optional.empty()) body += (body.empty() ? "" : " ") + std::string("(") + optional + ")*";
  return prefix + "root ::= " + body + "\n";  // not empty: the schema lists properties
}

}  // namespace

std::string prefix_gbnf_rules(const std::string& grammar, const std::string& prefix) {
  // First the names the grammar defines (a name at the start of a line, before "::=").
  std::set<std::string> defined;
  size_t line = 0;
  while (line < grammar.size()) {
    size_t end = grammar.find('\n', line);
    if (end == std::string::npos) end = grammar.size();
    size_t i = line;
    while (i < end && is_rule_char(grammar[i])) ++i;
    const size_t name_end = i;
    while (i < end && grammar[i] == ' ') ++i;
    if (name_end > line && grammar.compare(i, 3, "::=") == 0)
      defined.insert(grammar.substr(line, name_end - line));
    line = end + 1;
  }
  // Then every name outside literals and character classes that is one of them.
  std::string out;
  out.reserve(grammar.size() + grammar.size() / 4);
  for (size_t i = 0; i < grammar.size();) {
    const char c = grammar[i];
    if (c == '"' || c == '[') {
      const char close = c == '"' ? '"' : ']';
      size_t j = i + 1;
      while (j < grammar.size() && grammar[j] != close) j += grammar[j] == '\\' ? 2 : 1;
      j = std::min(j + 1, grammar.size());
      out.append(grammar, i, j - i);
      i = j;
    } else if (c == '#') {  // a comment runs to the end of its line
      size_t j = grammar.find('\n', i);
      if (j == std::string::npos) j = grammar.size();
      out.append(grammar, i, j - i);
      i = j;
    } else if (is_rule_char(c)) {
      size_t j = i;
      while (j < grammar.size() && is_rule_char(grammar[j])) ++j;
      const std::string name = grammar.substr(i, j - i);
      out += defined.count(name) ? prefix + name : name;
      i = j;
    } else {
      out += c;
      ++i;
    }
  }
  return out;
}

std::string tool_call_gbnf(ToolCallFormat format, const std::vector<ToolFunction>& functions,
                           const std::string& only, bool parallel) {
  if (format == ToolCallFormat::None)
    throw Error("the chat template has no tool-call format to force a call in");
  std::string choices, rules;
  for (size_t i = 0; i < functions.size(); ++i) {
    const ToolFunction& function = functions[i];
    if (!only.empty() && function.name != only) continue;
    const std::string prefix = "f" + std::to_string(i) + "-";
    std::string call;
    if (format == ToolCallFormat::XmlFunction) {
      call = literal("<function=" + function.name + ">\n") + " " + prefix + "root";
      rules += xml_parameters_grammar(function, prefix);
    } else {
      call = literal("{\"name\": \"" + function.name + "\", \"arguments\": ") + " " + prefix + "root \"}\"";
      rules += arguments_grammar(function, prefix);
    }
    if (!choices.empty()) choices += " | ";
    choices += call;
  }
  if (choices.empty()) throw Error("no function to force a call to");
  std::string grammar;
  switch (format) {
    case ToolCallFormat::JsonInToolCallTags:
      grammar = "call ::= \"<tool_call>\\n\" (" + choices + ") \"\\n</tool_call>\"\n";
      grammar += parallel ? "root ::= call (\"\\n\" call)*\n" : "root ::= call\n";
      break;
    case ToolCallFormat::ToolCallList:
      grammar = "call ::= " + choices + "\n";
      grammar += parallel ? "root ::= \"<TOOLCALL>[\" call (\", \" call)* \"]</TOOLCALL>\"\n"
                          : "root ::= \"<TOOLCALL>[\" call \"]</TOOLCALL>\"\n";
      break;
    case ToolCallFormat::XmlFunction:
      grammar = "call ::= \"<tool_call>\\n\" (" + choices + ") \"</function>\\n</tool_call>\"\n";
      grammar += parallel ? "root ::= call (\"\\n\" call)*\n" : "root ::= call\n";
      grammar += "xml-value ::= [^<]*\n";
      break;
    case ToolCallFormat::None:
      break;
  }
  return grammar + rules;
}

}  // namespace mb::server

// SPDX-License-Identifier: MIT
// The forced tool-call grammar's text (src/server/tool_call_grammar.h): rules of joined grammars
// renamed without touching literals or character classes, every format's call syntax as its
// template writes it, one call or several, and the refusals; the grammar engine (engine/grammar)
// accepts each grammar, and a call as each template writes it matches it completely.
#include "server/tool_call_grammar.h"

#include <gtest/gtest.h>

#include <string>

#include "core/error.h"
#include "engine/grammar/gbnf.h"
#include "engine/grammar/grammar_matcher.h"

namespace mb::server {
namespace {

std::vector<ToolFunction> grammar_functions() {
  return {
      {"get_weather", nlohmann::json::parse(R"({"type": "object", "properties": {"city": {"type": "string"}},
                                                  "required": ["city"], "additionalProperties": false})")},
      {"get_time", nullptr}};
}

bool grammar_has(const std::string& grammar, const std::string& piece) {
  return grammar.find(piece) != std::string::npos;
}

TEST(ToolCallGrammar, RulesArePrefixedOutsideLiteralsAndClasses) {
  const std::string grammar =
      "root ::= value \"value\" [value] ws # value in a comment\nvalue ::= \"a\\\"value\" | ws\nws ::= [ "
      "\\]]*\n";
  EXPECT_EQ(
      prefix_gbnf_rules(grammar, "p-"),
      "p-root ::= p-value \"value\" [value] p-ws # value in a comment\np-value ::= \"a\\\"value\" | p-ws\n"
      "p-ws ::= [ \\]]*\n");
}

TEST(ToolCallGrammar, EachFormatsCallSyntax) {
  const std::string tags = tool_call_gbnf(ToolCallFormat::JsonInToolCallTags, grammar_functions(), "", true);
  EXPECT_TRUE(grammar_has(tags,
                          "call ::= \"<tool_call>\\n\" (\"{\\\"name\\\": \\\"get_weather\\\", "
                          "\\\"arguments\\\": \" f0-root \"}\" | \"{\\\"name\\\": \\\"get_time\\\", "
                          "\\\"arguments\\\": \" f1-root \"}\") \"\\n</tool_call>\"\n"))
      << tags;
  EXPECT_TRUE(grammar_has(tags, "root ::= call (\"\\n\" call)*\n")) << tags;
  EXPECT_TRUE(grammar_has(tags, "\nf0-root ::= ")) << tags;
  EXPECT_TRUE(grammar_has(tags, "\"\\\"city\\\"")) << tags;  // the schema's property
  EXPECT_TRUE(grammar_has(tags, "\nf1-root ::= ")) << tags;

  const std::string one =
      tool_call_gbnf(ToolCallFormat::ToolCallList, grammar_functions(), "get_time", false);
  EXPECT_TRUE(grammar_has(one, "root ::= \"<TOOLCALL>[\" call \"]</TOOLCALL>\"\n")) << one;
  EXPECT_FALSE(grammar_has(one, "get_weather")) << one;

  const std::string xml = tool_call_gbnf(ToolCallFormat::XmlFunction, grammar_functions(), "", false);
  EXPECT_TRUE(grammar_has(xml, "\"<function=get_weather>\\n\" f0-root")) << xml;
  EXPECT_TRUE(grammar_has(xml, "f0-root ::= \"<parameter=city>\\n\" xml-value \"\\n</parameter>\\n\"\n"))
      << xml;
  EXPECT_TRUE(grammar_has(xml, "f1-root ::= (\"<parameter=\" [a-zA-Z0-9_.-]+ \">\\n\" xml-value")) << xml;
  EXPECT_TRUE(grammar_has(xml, "root ::= call\n")) << xml;
}

TEST(ToolCallGrammar, UnsupportedSchemasLeaveTheArgumentsFreeAndNothingToCallIsAnError) {
  std::vector<ToolFunction> functions = {
      {"f", nlohmann::json::parse(
                R"({"type": "object", "properties": {"s": {"type": "string", "pattern": "a+"}}})")}};
  const std::string grammar = tool_call_gbnf(ToolCallFormat::JsonInToolCallTags, functions, "", false);
  EXPECT_TRUE(grammar_has(grammar, "f0-root ::= ")) << grammar;
  EXPECT_THROW(tool_call_gbnf(ToolCallFormat::None, functions, "", false), Error);
  EXPECT_THROW(tool_call_gbnf(ToolCallFormat::JsonInToolCallTags, functions, "g", false), Error);
}

// Whether `text` is a complete match of `grammar`.
bool grammar_matches_fully(const std::string& grammar, const std::string& text) {
  const Grammar parsed = parse_gbnf(grammar);
  GrammarState state = grammar_initial_state(parsed);
  return grammar_advance_bytes(parsed, state, text) && grammar_may_end(state);
}

TEST(ToolCallGrammar, CallsAsTheTemplatesWriteThemMatch) {
  const std::vector<ToolFunction> functions = grammar_functions();
  const std::string weather = "{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}";
  const std::string time = "{\"name\": \"get_time\", \"arguments\": {}}";
  const std::string tags = tool_call_gbnf(ToolCallFormat::JsonInToolCallTags, functions, "", true);
  const std::string one_tag = "<tool_call>\n" + weather + "\n</tool_call>";
  EXPECT_TRUE(grammar_matches_fully(tags, one_tag));
  EXPECT_TRUE(grammar_matches_fully(tags, one_tag + "\n<tool_call>\n" + time + "\n</tool_call>"));
  // Not a call, a call with arguments the schema forbids, a second call where one is allowed.
  EXPECT_FALSE(grammar_matches_fully(tags, "Hello"));
  EXPECT_FALSE(grammar_matches_fully(
      tags, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"town\": \"Paris\"}}\n</tool_call>"));
  const std::string single = tool_call_gbnf(ToolCallFormat::JsonInToolCallTags, functions, "", false);
  EXPECT_TRUE(grammar_matches_fully(single, one_tag));
  EXPECT_FALSE(grammar_matches_fully(single, one_tag + "\n" + one_tag));
  // A named function: only it.
  const std::string named = tool_call_gbnf(ToolCallFormat::JsonInToolCallTags, functions, "get_time", true);
  EXPECT_FALSE(grammar_matches_fully(named, one_tag));
  EXPECT_TRUE(grammar_matches_fully(named, "<tool_call>\n" + time + "\n</tool_call>"));

  const std::string list = tool_call_gbnf(ToolCallFormat::ToolCallList, functions, "", true);
  EXPECT_TRUE(grammar_matches_fully(list, "<TOOLCALL>[" + weather + ", " + time + "]</TOOLCALL>"));
  const std::string xml = tool_call_gbnf(ToolCallFormat::XmlFunction, functions, "", false);
  EXPECT_TRUE(grammar_matches_fully(xml,
                                    "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</"
                                    "parameter>\n</function>\n</tool_call>"));
  EXPECT_TRUE(grammar_matches_fully(
      xml,
      "<tool_call>\n<function=get_time>\n<parameter=zone>\nUTC\n</parameter>\n</function>\n</tool_call>"));
  EXPECT_FALSE(grammar_matches_fully(
      xml,
      "<tool_call>\n<function=get_weather>\n<parameter=zone>\nUTC\n</parameter>\n</function>\n</tool_call>"));
  // A required parameter must be there.
  EXPECT_FALSE(grammar_matches_fully(xml, "<tool_call>\n<function=get_weather>\n</function>\n</tool_call>"));
}

}  // namespace
}  // namespace mb::server

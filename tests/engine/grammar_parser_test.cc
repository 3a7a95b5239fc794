// SPDX-License-Identifier: MIT
// The GBNF parser: every construct (checked by what the parsed grammar accepts), and every
// refusal, which names line:column and the problem.
#include <gtest/gtest.h>

#include <string>

#include "core/error.h"
#include "engine/grammar/gbnf.h"
#include "engine/grammar/grammar_matcher.h"

namespace mb {
namespace {

// Whether the whole of `text` is a sentence of `grammar`.
bool gbnf_accepts(const Grammar& grammar, std::string_view text) {
  GrammarState state = grammar_initial_state(grammar);
  return grammar_advance_bytes(grammar, state, text) && grammar_may_end(state);
}

bool gbnf_accepts(std::string_view gbnf, std::string_view text) {
  return gbnf_accepts(parse_gbnf(gbnf), text);
}

// The message of the mb::Error parse_gbnf throws for `gbnf` ("" if it parses).
std::string gbnf_refusal(std::string_view gbnf) {
  try {
    parse_gbnf(gbnf);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(GbnfParser, LiteralsAndTheirEscapes) {
  EXPECT_TRUE(gbnf_accepts(R"(root ::= "yes")", "yes"));
  EXPECT_FALSE(gbnf_accepts(R"(root ::= "yes")", "ye"));
  EXPECT_FALSE(gbnf_accepts(R"(root ::= "yes")", "yess"));
  EXPECT_TRUE(gbnf_accepts(R"(root ::= "a\nb\tc\rd\"e\\f\[g\]")", "a\nb\tc\rd\"e\\f[g]"));
  EXPECT_TRUE(gbnf_accepts(R"(root ::= "\x41\u00e9\U0001F600")", "A\xC3\xA9\xF0\x9F\x98\x80"));
  EXPECT_TRUE(gbnf_accepts("root ::= \"caf\xC3\xA9\"", "caf\xC3\xA9"));  // UTF-8 in the text
  EXPECT_TRUE(gbnf_accepts(R"(root ::= "")", ""));
}

TEST(GbnfParser, CharacterClassesRangesNegationAndAny) {
  const Grammar digits = parse_gbnf("root ::= [0-9a-f_]");
  for (const char* ok : {"0", "9", "a", "f", "_"}) EXPECT_TRUE(gbnf_accepts(digits, ok)) << ok;
  for (const char* bad : {"g", "A", "-", ""}) EXPECT_FALSE(gbnf_accepts(digits, bad)) << bad;
  const Grammar negated = parse_gbnf(R"(root ::= [^"\\\n])");
  EXPECT_TRUE(gbnf_accepts(negated, "x"));
  EXPECT_TRUE(gbnf_accepts(negated, "\xC3\xA9"));
  EXPECT_FALSE(gbnf_accepts(negated, "\""));
  EXPECT_FALSE(gbnf_accepts(negated, "\\"));
  EXPECT_FALSE(gbnf_accepts(negated, "\n"));
  EXPECT_TRUE(gbnf_accepts("root ::= [-a]", "-"));  // a leading '-' is literal
  EXPECT_TRUE(gbnf_accepts("root ::= [a-]", "-"));  // so is a trailing one
  EXPECT_TRUE(gbnf_accepts(R"(root ::= [\]\[])", "]"));
  EXPECT_TRUE(gbnf_accepts(R"(root ::= [\x00-\u00ff])", "\xC3\xBF"));
  EXPECT_TRUE(gbnf_accepts("root ::= .", "\xF0\x9F\x98\x80"));
  EXPECT_TRUE(gbnf_accepts("root ::= .", "\n"));
  EXPECT_FALSE(gbnf_accepts("root ::= .", "ab"));
}

TEST(GbnfParser, GroupsAlternationReferencesAndComments) {
  const Grammar g = parse_gbnf(R"(# a comment line
root ::= greeting (" " name)? # trailing comment
greeting ::= "hi" | "hello"   # alternatives
name ::= (
    "bob"
  | "alice"
)
)");
  for (const char* ok : {"hi", "hello", "hi bob", "hello alice"}) EXPECT_TRUE(gbnf_accepts(g, ok)) << ok;
  for (const char* bad : {"hi ", "hey", "hello bob alice", "bob"}) EXPECT_FALSE(gbnf_accepts(g, bad)) << bad;
  // A rule continues on the next line after `|`, and rules may be written in any order.
  EXPECT_TRUE(gbnf_accepts("root ::= a |\n  b\na ::= \"a\"\nb ::= \"b\"", "b"));
  // CRLF line ends.
  EXPECT_TRUE(gbnf_accepts("root ::= a\r\na ::= \"x\"\r\n", "x"));
}

TEST(GbnfParser, Repetitions) {
  const Grammar star = parse_gbnf(R"(root ::= "a"*)");
  for (const char* ok : {"", "a", "aaaa"}) EXPECT_TRUE(gbnf_accepts(star, ok)) << ok;
  EXPECT_FALSE(gbnf_accepts(star, "ab"));
  const Grammar plus = parse_gbnf(R"(root ::= "ab"+)");
  EXPECT_FALSE(gbnf_accepts(plus, ""));
  EXPECT_TRUE(gbnf_accepts(plus, "abab"));
  EXPECT_FALSE(gbnf_accepts(plus, "aba"));
  const Grammar opt = parse_gbnf(R"(root ::= "x" [0-9]? "y")");
  EXPECT_TRUE(gbnf_accepts(opt, "xy"));
  EXPECT_TRUE(gbnf_accepts(opt, "x5y"));
  EXPECT_FALSE(gbnf_accepts(opt, "x55y"));
  const auto counts = [](const std::string& gbnf, int from, int to) {
    const Grammar g = parse_gbnf(gbnf);
    std::string accepted;
    for (int n = 0; n <= 6; ++n)
      accepted += gbnf_accepts(g, std::string(static_cast<size_t>(n), 'a')) ? '1' : '0';
    std::string expected;
    for (int n = 0; n <= 6; ++n) expected += (n >= from && (to < 0 || n <= to)) ? '1' : '0';
    EXPECT_EQ(accepted, expected) << gbnf;
  };
  counts(R"(root ::= "a"{3})", 3, 3);
  counts(R"(root ::= "a"{2,})", 2, -1);
  counts(R"(root ::= "a"{1,4})", 1, 4);
  counts(R"(root ::= "a"{0,2})", 0, 2);
  counts(R"(root ::= "a"{ 2 , 3 })", 2, 3);
  EXPECT_TRUE(gbnf_accepts(R"(root ::= ("a" "a")*)", "aaaa"));
  EXPECT_FALSE(gbnf_accepts(R"(root ::= ("a" "a")*)", "aaa"));
  EXPECT_TRUE(gbnf_accepts(R"(root ::= [a-c]{2} "-" [0-9]+)", "ca-0042"));
}

TEST(GbnfParser, RefusalsNameLineColumnAndTheProblem) {
  const auto refused = [](std::string_view gbnf, const std::string& expected) {
    const std::string message = gbnf_refusal(gbnf);
    EXPECT_NE(message.find(expected), std::string::npos) << "grammar: " << gbnf << "\nmessage: " << message;
  };
  refused("root ::= foo", "line 1, column 10: undefined rule 'foo'");
  refused("start ::= \"a\"", "no 'root' rule");
  refused("root ::= \"a\"\nroot ::= \"b\"", "line 2, column 1: rule 'root' is defined twice");
  refused("root ::= (\"a\" | \"b\"", "line 1, column 10: unbalanced parentheses: this ( has no closing )");
  refused("root ::= \"a\")", "line 1, column 13: unbalanced parentheses: this ) has no opening (");
  refused("root ::= \"abc", "line 1, column 10: unterminated literal");
  refused("root ::= [abc", "line 1, column 10: unterminated character class");
  refused("root ::= []", "empty character class");
  refused("root ::= [z-a]", "upper end is below its lower end");
  refused("root ::= \"\\q\"", "line 1, column 11: unknown escape '\\q'");
  refused("root ::= \"\\x4\"", "expecting 2 hex digits");
  refused("root ::= \"\\UFFFFFFFF\"", "past U+10FFFF");
  refused("root ::= \"\xFF\"", "not valid UTF-8");
  refused("root ::= \"\xC3\"", "not valid UTF-8");
  refused("root = \"a\"", "line 1, column 6: expecting ::= after the rule name 'root'");
  refused("root ::= * \"a\"", "'*' has no item before it to repeat");
  refused("root ::= \"a\" | +", "'+' has no item before it to repeat");
  refused("root ::= {2}", "'{' has no item before it");
  refused("root ::= \"a\"{2", "expecting '}'");
  refused("root ::= \"a\"{,2}", "expecting a number");
  refused("root ::= \"a\"{3,2}", "maximum below its minimum");
  refused("root ::= \"a\"{100000}", "repetition count past the limit of 10000");
  refused("root ::= \"a\"\n  \"b\"", "line 2, column 3: expecting a rule name");
  refused("root ::= \"a\" }", "line 1, column 14: unexpected '}'");
  refused("root ::= <think>", "token references");
  refused("root ::= root \"a\"", "left-recursive: rule 'root'");
  refused("root ::= a\na ::= b? c\nb ::= \"x\"\nc ::= a \"y\" | \"z\"", "left-recursive");
  refused("root ::= (\"\")*", "left-recursive");
  // Columns count characters: the é before the error is one column.
  refused("root ::= \"\xC3\xA9\" x", "line 1, column 14: undefined rule 'x'");
}

TEST(GbnfParser, BoundsAreRefusedByName) {
  EXPECT_NE(gbnf_refusal(std::string(GbnfLimits::kMaxTextBytes + 1, ' ')).find("more than the limit"),
            std::string::npos);
  std::string deep = "root ::= ";
  for (int i = 0; i < 100; ++i) deep += "(";
  deep += "\"a\"";
  for (int i = 0; i < 100; ++i) deep += ")";
  EXPECT_NE(gbnf_refusal(deep).find("nested more than 64 deep"), std::string::npos);
  // {m,n} writes out n - m optional rules, and m copies: a product past the element budget.
  EXPECT_NE(gbnf_refusal(R"(root ::= ("a"{0,6000}){0,6000})").find("more than 10000 rules"),
            std::string::npos);
  EXPECT_NE(
      gbnf_refusal(
          R"(root ::= "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"{10000})")
          .find("expands to more than"),
      std::string::npos);
  // Within the bounds, a large repetition is fine.
  EXPECT_TRUE(gbnf_accepts(R"(root ::= "a"{0,3000})", std::string(3000, 'a')));
}

TEST(GbnfParser, NamesAndElementsAreLlamaCppsForm) {
  const Grammar g = parse_gbnf("root ::= [a-c] item\nitem ::= \"x\" | [^y]");
  ASSERT_EQ(g.rule_names.size(), 2u);
  EXPECT_EQ(g.rule_names[g.root], "root");
  const std::vector<GrammarElement> root = {
      {GrammarOp::Char, 'a'}, {GrammarOp::CharRangeUpper, 'c'}, {GrammarOp::RuleRef, 1}, {GrammarOp::End, 0}};
  EXPECT_EQ(g.rules[g.root], root);
  const std::vector<GrammarElement> item = {
      {GrammarOp::Char, 'x'}, {GrammarOp::Alt, 0}, {GrammarOp::CharNot, 'y'}, {GrammarOp::End, 0}};
  EXPECT_EQ(g.rules[1], item);
}

}  // namespace
}  // namespace mb

// SPDX-License-Identifier: MIT
// The pushdown matcher against a reference written here: a backtracking recursive descent over
// the parsed rules that returns every end position a rule can reach. Every string of a small
// alphabet up to a length is judged by both, random walks through the matcher's allowed bytes
// end in strings the reference accepts, and characters split across bytes are allowed exactly
// when some completion can follow.
//
// The reference is exponential, so the strings are short; the JSON-like case enumerates every
// string to the length where they get too many, then the prefixes the matcher keeps alive.
#include <gtest/gtest.h>

#include <random>
#include <set>
#include <string>
#include <vector>

#include "core/error.h"
#include "engine/grammar/gbnf.h"
#include "engine/grammar/grammar_matcher.h"

namespace mb {
namespace {

// ---- The reference: backtracking over code points. ----

bool refcheck_class(const std::vector<GrammarElement>& rule, size_t at, char32_t c, size_t& after) {
  const bool negated = rule[at].op == GrammarOp::CharNot;
  bool member = false;
  size_t i = at;
  do {
    if (rule[i].op == GrammarOp::CharAny) {
      member = true;
      i += 1;
    } else if (rule[i + 1].op == GrammarOp::CharRangeUpper) {
      member = member || (rule[i].value <= c && c <= rule[i + 1].value);
      i += 2;
    } else {
      member = member || rule[i].value == c;
      i += 1;
    }
  } while (rule[i].op == GrammarOp::CharAlt);
  after = i;
  return member != negated;
}

bool refcheck_ends_alt(const GrammarElement& e) {
  return e.op == GrammarOp::End || e.op == GrammarOp::Alt;
}

std::set<size_t> refcheck_rule(const Grammar& g, uint32_t r, const std::u32string& s, size_t pos);

std::set<size_t> refcheck_seq(const Grammar& g, uint32_t r, size_t at, const std::u32string& s, size_t pos) {
  const auto& rule = g.rules[r];
  if (refcheck_ends_alt(rule[at])) return {pos};
  std::set<size_t> ends;
  if (rule[at].op == GrammarOp::RuleRef) {
    for (size_t mid : refcheck_rule(g, rule[at].value, s, pos))
      ends.merge(refcheck_seq(g, r, at + 1, s, mid));
    return ends;
  }
  size_t after = 0;
  if (pos < s.size() && refcheck_class(rule, at, s[pos], after)) return refcheck_seq(g, r, after, s, pos + 1);
  return ends;
}

std::set<size_t> refcheck_rule(const Grammar& g, uint32_t r, const std::u32string& s, size_t pos) {
  std::set<size_t> ends;
  const auto& rule = g.rules[r];
  for (size_t a = 0; a < rule.size();) {
    ends.merge(refcheck_seq(g, r, a, s, pos));
    while (!refcheck_ends_alt(rule[a])) ++a;
    ++a;
  }
  return ends;
}

std::u32string refcheck_decode(std::string_view utf8) {
  std::u32string out;
  for (size_t i = 0; i < utf8.size();) {
    const auto b = static_cast<unsigned char>(utf8[i]);
    const int n = b < 0x80 ? 1 : b < 0xE0 ? 2 : b < 0xF0 ? 3 : 4;
    char32_t c = n == 1 ? b : n == 2 ? (b & 0x1F) : n == 3 ? (b & 0x0F) : (b & 0x07);
    for (int k = 1; k < n; ++k) c = (c << 6) | (static_cast<unsigned char>(utf8[i + k]) & 0x3F);
    out.push_back(c);
    i += static_cast<size_t>(n);
  }
  return out;
}

bool refcheck_accepts(const Grammar& g, std::string_view utf8) {
  const std::u32string s = refcheck_decode(utf8);
  return refcheck_rule(g, g.root, s, 0).count(s.size()) > 0;
}

bool grammar_matcher_accepts(const Grammar& g, std::string_view text) {
  GrammarState state = grammar_initial_state(g);
  return grammar_advance_bytes(g, state, text) && grammar_may_end(state);
}

struct GrammarMatcherCase {
  const char* gbnf;
  std::vector<std::string> alphabet;  // characters (UTF-8) the strings are made of
  int max_length;
};

const std::vector<GrammarMatcherCase>& grammar_matcher_cases() {
  static const std::vector<GrammarMatcherCase> cases = {
      {R"(root ::= "yes" | "no")", {"y", "e", "s", "n", "o"}, 4},
      {R"(root ::= ("ab" | "a")* "b"?)", {"a", "b", "c"}, 7},
      {R"g(root ::= "(" root ")" root | "")g", {"(", ")"}, 10},
      {R"(root ::= [a-c]{1,3} ("," [a-c]{1,3})*)", {"a", "c", ",", "d"}, 7},
      {R"(root ::= [^,]+ "," .)", {"a", ",", "\xC3\xA9"}, 6},
      {R"(root ::= x x
x ::= "a"? "b"*)",
       {"a", "b"},
       7},
      {R"(root ::= "{" ws (pair ("," ws pair)*)? "}"
pair ::= str ws ":" ws val ws
str ::= "\"" [a-b]* "\""
val ::= str | [0-9]+ | "[" (val ("," val)*)? "]"
ws ::= " "?)",
       {"{", "}", "\"", "a", ":", "1", ",", " ", "[", "]"},
       9},
      {"root ::= [\xC3\xA9-\xC3\xAB] | \"\xF0\x9F\x98\x80\" [^\xC3\xA9]",
       {"\xC3\xA9", "\xC3\xAA", "\xF0\x9F\x98\x80", "x", "\xC3\xA8"},
       3},
  };
  return cases;
}

TEST(GrammarMatcher, EveryShortStringIsJudgedAsTheBacktrackingReferenceJudgesIt) {
  for (const GrammarMatcherCase& c : grammar_matcher_cases()) {
    const Grammar g = parse_gbnf(c.gbnf);
    std::vector<std::string> layer{""};
    int accepted = 0;
    for (int length = 0; length <= c.max_length; ++length) {
      std::vector<std::string> next_layer;
      for (const std::string& s : layer) {
        const bool expected = refcheck_accepts(g, s);
        ASSERT_EQ(grammar_matcher_accepts(g, s), expected) << c.gbnf << "\nstring: '" << s << "'";
        accepted += expected ? 1 : 0;
        if (length == c.max_length) continue;
        // Every string while there are few; past that only those the matcher can still
        // complete (the walks below cover the rest from the other side).
        if (layer.size() * c.alphabet.size() > 20000) {
          GrammarState state = grammar_initial_state(g);
          if (!grammar_advance_bytes(g, state, s)) continue;
        }
        for (const std::string& ch : c.alphabet) next_layer.push_back(s + ch);
      }
      layer = std::move(next_layer);
    }
    EXPECT_GT(accepted, 0) << c.gbnf;  // the case exercises acceptance, not only refusal
  }
}

TEST(GrammarMatcher, RandomWalksThroughAllowedBytesEndInAcceptedStrings) {
  std::mt19937_64 rng(44);
  for (const GrammarMatcherCase& c : grammar_matcher_cases()) {
    const Grammar g = parse_gbnf(c.gbnf);
    for (int walk = 0; walk < 200; ++walk) {
      GrammarState state = grammar_initial_state(g);
      std::string text;
      for (int step = 0; step < 40; ++step) {
        if (grammar_may_end(state) && (grammar_must_end(state) || rng() % 4 == 0)) break;
        // The bytes allowed next, among all 256.
        std::vector<uint8_t> allowed;
        GrammarState next;
        for (int b = 0; b < 256; ++b)
          if (grammar_advance_byte(g, state, static_cast<uint8_t>(b), next))
            allowed.push_back(static_cast<uint8_t>(b));
        ASSERT_FALSE(allowed.empty()) << c.gbnf << "\na walk is stuck after '" << text << "'";
        const uint8_t b = allowed[rng() % allowed.size()];
        ASSERT_TRUE(grammar_advance_byte(g, state, b, next));
        state = std::move(next);
        text.push_back(static_cast<char>(b));
      }
      if (!grammar_may_end(state)) continue;  // a walk cut at 40 bytes
      EXPECT_TRUE(refcheck_accepts(g, text)) << c.gbnf << "\nwalk: '" << text << "'";
    }
  }
}

TEST(GrammarMatcher, SplitCharactersAreAllowedExactlyWhenSomeCompletionCanFollow) {
  // Only é (C3 A9) to ë (C3 AB), or the emoji F0 9F 98 80.
  const Grammar g = parse_gbnf("root ::= [\xC3\xA9-\xC3\xAB] | \"\xF0\x9F\x98\x80\"");
  GrammarState state = grammar_initial_state(g);
  GrammarState next;
  EXPECT_TRUE(grammar_advance_byte(g, state, 0xC3, next));
  EXPECT_FALSE(grammar_may_end(next));                       // half a character is not an end
  EXPECT_FALSE(grammar_advance_byte(g, state, 0xC4, next));  // U+0100.. : none in the class
  EXPECT_FALSE(grammar_advance_byte(g, state, 0xA9, next));  // a continuation byte first
  EXPECT_FALSE(grammar_advance_byte(g, state, 0xFF, next));  // no character starts so
  GrammarState half = state;
  ASSERT_TRUE(grammar_advance_bytes(g, half, "\xC3"));
  EXPECT_TRUE(grammar_advance_byte(g, half, 0xAA, next));
  EXPECT_TRUE(grammar_may_end(next));
  EXPECT_FALSE(grammar_advance_byte(g, half, 0xA8, next));  // è
  EXPECT_FALSE(grammar_advance_byte(g, half, 'a', next));
  GrammarState emoji = state;
  EXPECT_TRUE(grammar_advance_bytes(g, emoji, "\xF0\x9F\x98"));
  EXPECT_FALSE(grammar_advance_bytes(g, emoji, "\x81"));
  // A negated class allows a lead byte while any character under it stays outside the class,
  // and refuses it once every one is excluded.
  const Grammar not_e = parse_gbnf("root ::= [^\xC3\xA9]");
  GrammarState s2 = grammar_initial_state(not_e);
  EXPECT_TRUE(grammar_advance_byte(not_e, s2, 0xC3, next));
  const Grammar not_block = parse_gbnf("root ::= [^\\u00c0-\\u00ff]");
  GrammarState s3 = grammar_initial_state(not_block);
  EXPECT_FALSE(grammar_advance_byte(not_block, s3, 0xC3, next));  // C3 xx is U+00C0..U+00FF
  EXPECT_TRUE(grammar_advance_byte(not_block, s3, 0xC4, next));
  // Overlong forms and surrogates are never characters.
  const Grammar any = parse_gbnf("root ::= .");
  GrammarState s4 = grammar_initial_state(any);
  EXPECT_FALSE(grammar_advance_byte(any, s4, 0xC0, next));
  EXPECT_FALSE(grammar_advance_bytes(any, s4, "\xE0\x80\x80"));
  s4 = grammar_initial_state(any);
  EXPECT_FALSE(grammar_advance_bytes(any, s4, "\xED\xA0\x80"));
}

TEST(GrammarMatcher, MayEndAndMustEnd) {
  const Grammar g = parse_gbnf(R"(root ::= "a" "b"?)");
  GrammarState state = grammar_initial_state(g);
  EXPECT_FALSE(grammar_may_end(state));
  EXPECT_FALSE(grammar_must_end(state));
  ASSERT_TRUE(grammar_advance_bytes(g, state, "a"));
  EXPECT_TRUE(grammar_may_end(state));
  EXPECT_FALSE(grammar_must_end(state));
  ASSERT_TRUE(grammar_advance_bytes(g, state, "b"));
  EXPECT_TRUE(grammar_must_end(state));
  GrammarState next;
  EXPECT_FALSE(grammar_advance_byte(g, state, 'b', next));
  EXPECT_TRUE(grammar_must_end(grammar_initial_state(parse_gbnf(R"(root ::= "")"))));
}

TEST(GrammarMatcher, AnAmbiguousGrammarFailsByNameInsteadOfGrowingWithoutBound) {
  // After k a's, each of the 2^k choices of closing letters is a different stack.
  const Grammar g = parse_gbnf(R"(root ::= "a" root "b" | "a" root "c" | "")");
  try {
    GrammarState state = grammar_initial_state(g);
    grammar_advance_bytes(g, state, std::string(64, 'a'));
    ADD_FAILURE() << "expected a refusal";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("too ambiguous"), std::string::npos) << e.what();
  }
}

TEST(GrammarMatcher, DeepRightRecursionDoesNotGrowTheStack) {
  const Grammar g = parse_gbnf(R"(root ::= "a" root | "")");
  GrammarState state = grammar_initial_state(g);
  ASSERT_TRUE(grammar_advance_bytes(g, state, std::string(10000, 'a')));
  EXPECT_TRUE(grammar_may_end(state));
  for (const GrammarStack& s : state.stacks) EXPECT_LE(s.size(), 2u);
}

}  // namespace
}  // namespace mb

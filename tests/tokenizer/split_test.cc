// SPDX-License-Identifier: MIT
// The Split pre-tokenizer on Oniguruma (tokenizer/split.h, tokenizer/onig_regex.h): the
// hand-written matchers of the GPT-2, Llama-3 and Qwen2 regexes find exactly the matches
// Oniguruma finds; bad patterns and behaviors are refused with the file and pattern named; a
// regex that backtracks without end is stopped by its retry limits; concurrent encodes agree.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <thread>
#include <vector>

#include "common/timing.h"
#include "core/error.h"
#include "tokenizer/onig_regex.h"
#include "tokenizer/pipeline.h"
#include "tokenizer/split.h"
#include "tokenizer/split_patterns.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/tokenizer_test_support.h"
#include "tokenizer/utf8.h"

namespace mb {
namespace {

using nlohmann::json;
using test::escape;

// Every valid text of the golden corpus and of the Unicode edge cases.
const std::vector<std::string>& corpus_texts() {
  static const std::vector<std::string> texts = [] {
    std::vector<std::string> out;
    for (const auto& c : test::golden_corpus()) out.push_back(tok::to_valid_utf8(c.bytes));
    const json edges = test::read_json_file(std::string(MB_TEST_DATA_DIR) + "/tokenizers/edge_cases.json");
    for (const auto& c : edges.at("cases")) out.push_back(c.at("text").get<std::string>());
    return out;
  }();
  return texts;
}

// Short strings over characters of every class the three patterns tell apart: letters (ASCII,
// the contraction letters and U+017F, which folds to 's', titlecase, other letters), digits of
// several scripts, white space (line breaks, tab, no-break space, U+3000), apostrophes,
// punctuation, symbols, combining marks and format characters.
const std::vector<std::string>& class_alphabet() {
  static const std::vector<std::string> alphabet = {
      "a",  "S",  "t",  "\u017f", "\u01c5", "\u65e5", "1", "\u0663", "\uff15", " ",
      "\n", "\r", "\t", "\u00a0", "\u3000", "'",      "!", "/",      "\u0301", "\u200d"};
  return alphabet;
}

std::vector<std::string> class_strings() {
  const auto& alphabet = class_alphabet();
  std::vector<std::string> out;
  // Every string of up to three characters...
  for (const auto& a : alphabet) {
    out.push_back(a);
    for (const auto& b : alphabet) {
      out.push_back(a + b);
      for (const auto& c : alphabet) out.push_back(a + b + c);
    }
  }
  // ...and seeded random ones of 4 to 16 (mt19937's sequence is fixed by the standard).
  std::mt19937 random(20261203);
  for (int i = 0; i < 3000; ++i) {
    std::string text;
    const size_t length = 4 + random() % 13;
    for (size_t k = 0; k < length; ++k) text += alphabet[random() % alphabet.size()];
    out.push_back(std::move(text));
  }
  return out;
}

std::string describe(const std::vector<tok::RegexMatch>& matches) {
  std::string out;
  for (const auto& m : matches) out += "[" + std::to_string(m.begin) + "," + std::to_string(m.end) + ")";
  return out;
}

// The proof the fast path is allowed: match for match, each hand-written matcher equals
// Oniguruma compiled from the pattern string it stands for.
TEST(SplitFastPath, HandWrittenMatchersEqualOniguruma) {
  const std::vector<std::pair<tok::SplitPattern, std::string_view>> patterns = {
      {tok::SplitPattern::Gpt2, tok::kGpt2PatternRegex},
      {tok::SplitPattern::Llama3, tok::kLlama3PatternRegex},
      {tok::SplitPattern::Qwen2, tok::kQwen2PatternRegex}};
  std::vector<std::string> texts = corpus_texts();
  const std::vector<std::string> generated = class_strings();
  texts.insert(texts.end(), generated.begin(), generated.end());
  ASSERT_GT(texts.size(), 10000u);
  for (const auto& [pattern, regex_text] : patterns) {
    const tok::OnigurumaRegex regex(regex_text, "test");
    size_t failures = 0;
    for (const std::string& text : texts) {
      std::vector<tok::RegexMatch> fast;
      std::vector<tok::RegexMatch> onig;
      tok::find_pattern_matches(text, pattern, fast);
      regex.find_all(text, onig, "test");
      const bool same = fast.size() == onig.size() &&
                        std::equal(fast.begin(), fast.end(), onig.begin(), [](const auto& x, const auto& y) {
                          return x.begin == y.begin && x.end == y.end;
                        });
      if (!same && failures++ < 5) {
        ADD_FAILURE() << regex_text << " on " << escape(text) << "\n  fast " << describe(fast) << "\n  onig "
                      << describe(onig);
      }
    }
    EXPECT_EQ(failures, 0u) << "of " << texts.size() << " texts for " << regex_text;
  }
}

TEST(SplitFastPath, OnlyTheThreeKnownPatternsTakeIt) {
  const auto split = [](const json& pattern) {
    return tok::SplitPreTokenizer::from_json({{"type", "Split"}, {"pattern", pattern}}, "t.json");
  };
  EXPECT_TRUE(split({{"Regex", tok::kGpt2PatternRegex}}).uses_fast_path());
  EXPECT_TRUE(split({{"Regex", tok::kLlama3PatternRegex}}).uses_fast_path());
  EXPECT_TRUE(split({{"Regex", tok::kQwen2PatternRegex}}).uses_fast_path());
  EXPECT_FALSE(split({{"Regex", std::string(tok::kGpt2PatternRegex) + "|x"}}).uses_fast_path());
  // A String pattern is a literal, never one of the regexes, whatever its text.
  EXPECT_FALSE(split({{"String", tok::kGpt2PatternRegex}}).uses_fast_path());
}

// The onig crate's find_iter, which Hugging Face's Split runs: an empty match is kept unless it
// ends where the previous match ended.
TEST(OnigurumaRegex, FindAllKeepsEmptyMatchesAsTheOnigCrateDoes) {
  const auto matches = [](std::string_view pattern, std::string_view text) {
    std::vector<tok::RegexMatch> out;
    tok::OnigurumaRegex(pattern, "t.json").find_all(text, out, "t.json");
    return describe(out);
  };
  EXPECT_EQ(matches("a*", "baaab"), "[0,0)[1,4)[5,5)");
  EXPECT_EQ(matches("", "ab"), "[0,0)[1,1)[2,2)");
  // The search after an empty match moves on by one character, not one byte.
  EXPECT_EQ(matches("", "\u65e5x"), "[0,0)[3,3)[4,4)");
  EXPECT_EQ(matches("x|(?=c)", "xabc"), "[0,1)[3,3)");
  EXPECT_EQ(matches("\\b", "ab cd"), "[0,0)[2,2)[3,3)[5,5)");
  EXPECT_EQ(matches("\\p{N}{1,3}", "a12345"), "[1,4)[4,6)");
  EXPECT_EQ(matches("z", ""), "");
  EXPECT_EQ(matches("$", ""), "[0,0)");
}

TEST(OnigurumaRegex, StringPatternsAreEscapedAsRegexEscapeDoes) {
  EXPECT_EQ(tok::escape_regex_literal("a.b*c"), "a\\.b\\*c");
  EXPECT_EQ(tok::escape_regex_literal("\\.+*?()|[]{}^$#&-~"),
            "\\\\\\.\\+\\*\\?\\(\\)\\|\\[\\]\\{\\}\\^\\$\\#\\&\\-\\~");
  EXPECT_EQ(tok::escape_regex_literal("\u2581 x"), "\u2581 x");
  // Each escaped literal matches itself and nothing else.
  const std::string literal = "a.b+c*?()|[]{}^$#&-~\\z";
  std::vector<tok::RegexMatch> out;
  tok::OnigurumaRegex(tok::escape_regex_literal(literal), "t.json")
      .find_all("xx" + literal + literal, out, "t");
  EXPECT_EQ(describe(out), "[2,24)[24,46)");
}

std::string load_error(const json& pre_tokenizer) {
  json file = test::tiny_tokenizer_json({});
  file["pre_tokenizer"] = pre_tokenizer;
  try {
    Tokenizer::from_json_string(file.dump(), "bad.json");
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

json split(const json& pattern, const json& behavior = "Isolated") {
  return {{"type", "Split"}, {"pattern", pattern}, {"behavior", behavior}, {"invert", false}};
}

TEST(SplitErrors, BadPatternsNameTheFileAndThePattern) {
  EXPECT_EQ(load_error(split({{"Regex", "(?<x"}})),
            "bad.json: the regex '(?<x' does not compile: invalid group name <x>");
  EXPECT_EQ(load_error(split({{"Regex", "*a"}})),
            "bad.json: the regex '*a' does not compile: target of repeat operator is not specified");
  EXPECT_EQ(load_error(split({{"Regex", "[b-a]"}})),
            "bad.json: the regex '[b-a]' does not compile: empty range in char class");
  EXPECT_EQ(load_error(split({{"Regex", "(a"}})),
            "bad.json: the regex '(a' does not compile: end pattern with unmatched parenthesis");
  // JSON strings are valid UTF-8; the class checks what Oniguruma would not.
  try {
    tok::OnigurumaRegex(std::string("a\xff", 2), "bad.json");
    ADD_FAILURE() << "invalid UTF-8 accepted";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), "bad.json: the regex 'a\ufffd' is not valid UTF-8");
  }
  EXPECT_EQ(
      load_error(split({{"Regex", 5}})),
      "bad.json: Split pre-tokenizer needs a pattern {\"Regex\": \"...\"} or {\"String\": \"...\"}, got "
      "{\"Regex\":5}");
  EXPECT_EQ(load_error({{"type", "Split"}}),
            "bad.json: Split pre-tokenizer needs a pattern {\"Regex\": \"...\"} or {\"String\": \"...\"}");
  EXPECT_NE(load_error(split({{"Regex", "a"}, {"String", "b"}})).find("needs a pattern"), std::string::npos);
  EXPECT_EQ(load_error(split({{"Regex", std::string(70000, 'a')}})),
            "bad.json: Split pattern of 70000 bytes, more than 65536");
  // A long pattern that does not compile is echoed only in part.
  const std::string long_bad = std::string(300, 'a') + "(";
  EXPECT_EQ(load_error(split({{"Regex", long_bad}})),
            "bad.json: the regex '" + std::string(200, 'a') +
                "...' does not compile: end pattern with unmatched parenthesis");
}

TEST(SplitErrors, UnknownBehaviorsAndInvertValuesAreRefused) {
  EXPECT_EQ(load_error(split({{"String", " "}}, "Merged")),
            "bad.json: unknown Split behavior \"Merged\" (expected Removed, Isolated, MergedWithPrevious, "
            "MergedWithNext or Contiguous)");
  EXPECT_NE(load_error(split({{"String", " "}}, 3)).find("unknown Split behavior 3"), std::string::npos);
  json inverted = split({{"String", " "}});
  inverted["invert"] = "yes";
  EXPECT_EQ(load_error(inverted), "bad.json: pre_tokenizer field 'invert' must be a boolean");
}

Tokenizer with_pre_tokenizer(const json& pre_tokenizer) {
  json file = test::tiny_tokenizer_json({});
  file["pre_tokenizer"] = {
      {"type", "Sequence"},
      {"pretokenizers",
       {pre_tokenizer, {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", false}}}}};
  return Tokenizer::from_json_string(file.dump(), "hostile.json");
}

// Alternatives that overlap backtrack exponentially on a run of 'a' that ends in no 'c'; the
// second alternative then matches the '!'.
constexpr const char* kExponential = "(?:a|aa)*c|!";

TEST(SplitLimits, ExponentialBacktrackingIsStoppedWithAnError) {
  const Tokenizer tokenizer = with_pre_tokenizer(split({{"Regex", kExponential}}));
  std::string message;
  const double seconds = test::least_cpu_seconds(
      [&] {
        try {
          tokenizer.encode(std::string(40, 'a') + "!");
        } catch (const Error& e) {
          message = e.what();
        }
      },
      1);
  EXPECT_EQ(
      message,
      "hostile.json: the regex '(?:a|aa)*c|!' backtracks more than 1010496 steps on a 41-byte text (its "
      "limit: 1000000 plus 256 per byte searched)");
  // About two million steps at most (each search's doubling limits) take milliseconds.
  EXPECT_LT(seconds, test::scaled_seconds(0.5));
  // The same pattern on text it matches quickly is fine.
  EXPECT_EQ(tokenizer.encode("aac!"), (std::vector<int32_t>{'a', 'a', 'c', '!'}));
  // The limit at one start position is Oniguruma's own, reported as such.
  tok::RegexSearchLimits per_match;
  per_match.retries_in_match = 1000;
  std::vector<tok::RegexMatch> out;
  try {
    tok::OnigurumaRegex(kExponential, "hostile.json")
        .find_all(std::string(40, 'a') + "!", out, "hostile.json", per_match);
    ADD_FAILURE() << "no limit reached";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()),
              "hostile.json: the regex '(?:a|aa)*c|!' failed on a 41-byte text: retry-limit-in-match over");
  }
}

// Quadratic work: "(?:a|b)*c" fails after backtracking over the rest of the run at every start
// position. The budget covers all the searches of a text, so it stops this too.
TEST(SplitLimits, TheBudgetCoversAllStartPositionsAndSearches) {
  const tok::OnigurumaRegex regex("(?:a|b)*c|!", "hostile.json");
  const std::string text = std::string(500, 'a') + "!";
  std::vector<tok::RegexMatch> out;
  regex.find_all(text, out, "hostile.json");
  // About 125,000 steps: within the default budget of 1.13 million for 501 bytes.
  EXPECT_EQ(describe(out), "[500,501)");
  tok::RegexSearchLimits small;
  small.retries_per_byte = 16;
  small.retries_slack = 1000;
  try {
    regex.find_all(text, out, "hostile.json", small);
    ADD_FAILURE() << "no limit reached";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()),
              "hostile.json: the regex '(?:a|b)*c|!' backtracks more than 9016 steps on a 501-byte text (its "
              "limit: "
              "1000 plus 16 per byte searched)");
  }
}

// The patterns of real tokenizers need a small part of the budget: every corpus text and long
// runs of each class pass with an eighth of the steps per byte and almost no constant. (The
// least that passed was 16 per byte for the GPT-2, Llama-3 and GPT-4o patterns, on "1a1a...":
// one search per byte, each charged the first limit of 16; 27 for DeepSeek-V3's words, on a
// run of digits; 8 for its digits, 3 for its CJK runs.)
TEST(SplitLimits, RealPatternsStayFarWithinTheBudget) {
  std::vector<std::string> patterns = {std::string(tok::kGpt2PatternRegex),
                                       std::string(tok::kLlama3PatternRegex)};
  for (const char* name : {"gpt4o", "deepseek-v3"}) {
    const json& config = test::fixture_json(name);
    for (const auto& step : config.at("pre_tokenizer").at("pretokenizers")) {
      if (step.at("type") == "Split") patterns.push_back(step.at("pattern").at("Regex").get<std::string>());
    }
  }
  ASSERT_EQ(patterns.size(), 6u);
  tok::RegexSearchLimits tight;
  tight.retries_per_byte = 32;
  tight.retries_slack = 256;
  std::vector<std::string> texts = corpus_texts();
  // Long runs of each class, where backtracking grows with the run.
  for (const char* run : {" ", "\n", "a", "A", "1", "!", "\u65e5", " \n", "\r\n", "'s", "1a", "a!", "aA"}) {
    std::string text;
    while (text.size() < 20000) text += run;
    texts.push_back(text + "x");
  }
  for (const std::string& pattern : patterns) {
    const tok::OnigurumaRegex regex(pattern, "test");
    for (const std::string& text : texts) {
      std::vector<tok::RegexMatch> out;
      EXPECT_NO_THROW(regex.find_all(text, out, "test", tight))
          << pattern << " on " << escape(text.substr(0, 80));
    }
  }
}

// One compiled regex is shared by the copies of a tokenizer and searched from many threads.
TEST(SplitThreads, ConcurrentEncodesAgree) {
  const Tokenizer& tokenizer = test::fixture_tokenizer("gpt4o");
  const auto& texts = corpus_texts();
  std::vector<std::vector<int32_t>> expected;
  for (size_t i = 0; i < texts.size(); i += 7) expected.push_back(tokenizer.encode(texts[i]));
  std::vector<int> mismatches(4, 0);
  std::vector<std::thread> threads;
  const Tokenizer copy = tokenizer;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      const Tokenizer& mine = t % 2 == 0 ? tokenizer : copy;
      for (size_t i = 0, k = 0; i < texts.size(); i += 7, ++k) {
        if (mine.encode(texts[i]) != expected[k]) ++mismatches[t];
      }
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(mismatches, std::vector<int>(4, 0));
}

}  // namespace
}  // namespace mb

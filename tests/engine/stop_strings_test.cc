// SPDX-License-Identifier: MIT
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "core/error.h"
#include "engine/stop_strings.h"

namespace mb {
namespace {

TEST(StopStrings, StopSplitAcrossTwoPieces) {
  StopStringMatcher matcher({"</s>"});
  EXPECT_EQ(matcher.push("hello </"), "hello ");
  EXPECT_FALSE(matcher.stopped());
  EXPECT_EQ(matcher.push("s> world"), "");
  EXPECT_TRUE(matcher.stopped());
  EXPECT_EQ(matcher.matched_stop(), "</s>");
  EXPECT_EQ(matcher.flush(), "");
}

TEST(StopStrings, StopSplitAcrossThreePieces) {
  StopStringMatcher matcher({"STOP"});
  EXPECT_EQ(matcher.push("a ST"), "a ");
  EXPECT_EQ(matcher.push("O"), "");
  EXPECT_FALSE(matcher.stopped());
  EXPECT_EQ(matcher.push("P tail"), "");
  EXPECT_TRUE(matcher.stopped());
  EXPECT_EQ(matcher.push("more"), "");
  EXPECT_EQ(matcher.flush(), "");
}

TEST(StopStrings, OverlappingPrefixRestartsTheMatch) {
  StopStringMatcher matcher({"ab"});
  EXPECT_EQ(matcher.push("a"), "");
  EXPECT_EQ(matcher.push("a"), "a");  // the first "a" can no longer start "ab"
  EXPECT_EQ(matcher.push("b"), "");
  EXPECT_TRUE(matcher.stopped());

  StopStringMatcher whole({"ab"});
  EXPECT_EQ(whole.push("aab"), "a");
  EXPECT_TRUE(whole.stopped());

  // "abab" is not a prefix of "abac", but its suffix "ab" is, so only "ab" is released.
  StopStringMatcher self_overlap({"abac"});
  EXPECT_EQ(self_overlap.push("aba"), "");
  EXPECT_EQ(self_overlap.push("b"), "ab");
  EXPECT_EQ(self_overlap.push("ac!"), "");
  EXPECT_TRUE(self_overlap.stopped());
}

TEST(StopStrings, ShorterStopCompletingFirstWins) {
  StopStringMatcher matcher({"hello world", "lo w"});
  EXPECT_EQ(matcher.push("hel"), "");
  EXPECT_EQ(matcher.push("lo w"), "hel");
  EXPECT_TRUE(matcher.stopped());
  EXPECT_EQ(matcher.matched_stop(), "lo w");

  // Within one piece: "bc" ends before "abcd" does.
  StopStringMatcher inside({"abcd", "bc"});
  EXPECT_EQ(inside.push("xabcd"), "xa");
  EXPECT_EQ(inside.matched_stop(), "bc");

  // Two stops ending at the same byte: the one starting earlier wins, so neither is emitted.
  StopStringMatcher same_end({"c", "abc"});
  EXPECT_EQ(same_end.push("xab"), "x");
  EXPECT_EQ(same_end.push("c"), "");
  EXPECT_EQ(same_end.matched_stop(), "abc");
}

TEST(StopStrings, TextAfterTheStopIsDropped) {
  StopStringMatcher matcher({"\n\n"});
  EXPECT_EQ(matcher.push("end.\n\nNext question"), "end.");
  EXPECT_TRUE(matcher.stopped());
  EXPECT_EQ(matcher.push("more"), "");
  EXPECT_EQ(matcher.flush(), "");
}

TEST(StopStrings, FlushReturnsTheHeldTailWhenNothingStopped) {
  StopStringMatcher matcher({"END"});
  EXPECT_EQ(matcher.push("the E"), "the ");
  EXPECT_EQ(matcher.push("N"), "");
  EXPECT_EQ(matcher.flush(), "EN");
  EXPECT_FALSE(matcher.stopped());
  EXPECT_TRUE(matcher.matched_stop().empty());

  StopStringMatcher diverging({"END"});
  EXPECT_EQ(diverging.push("the EN"), "the ");
  EXPECT_EQ(diverging.push("d"), "ENd");  // case-sensitive: "ENd" cannot start "END"
  EXPECT_EQ(diverging.flush(), "");
}

TEST(StopStrings, HoldsBackOnlyTheLongestSuffixThatCanStartAStop) {
  StopStringMatcher matcher({"END"});
  EXPECT_EQ(matcher.push("the E"), "the ");
  EXPECT_EQ(matcher.flush(), "E");

  // Text that cannot begin any stop string is released immediately, in full.
  StopStringMatcher passthrough({"END", "###"});
  EXPECT_EQ(passthrough.push("plain text"), "plain text");
  EXPECT_EQ(passthrough.push("##"), "");
  EXPECT_EQ(passthrough.push("x"), "##x");

  StopStringMatcher none({});
  EXPECT_EQ(none.push("anything at all"), "anything at all");
  EXPECT_EQ(none.push(""), "");
  EXPECT_FALSE(none.stopped());
}

TEST(StopStrings, MultibyteUtf8StopStrings) {
  // "。" is E3 80 82; the pieces split it between its bytes.
  StopStringMatcher matcher({"\u3002"});
  EXPECT_EQ(matcher.push("\u65e5\u672c\xe3\x80"), "\u65e5\u672c");
  EXPECT_EQ(matcher.push("\x82\u6b21"), "");
  EXPECT_TRUE(matcher.stopped());

  // "é" (C3 A9) shares its lead byte with "è" (C3 A8); no partial character is ever released.
  StopStringMatcher accents({"\u00e8!"});
  EXPECT_EQ(accents.push("caf\u00e9"), "caf\u00e9");
  EXPECT_EQ(accents.push("\xc3"), "");
  EXPECT_EQ(accents.push("\xa8"), "");
  EXPECT_EQ(accents.push("?"), "\u00e8?");

  StopStringMatcher emoji({"\U0001F6D1"});
  EXPECT_EQ(emoji.push("go \xf0\x9f"), "go ");
  EXPECT_EQ(emoji.push("\x9b"), "");
  EXPECT_EQ(emoji.push("\x91 after"), "");
  EXPECT_TRUE(emoji.stopped());
}

TEST(StopStrings, EmptyStopStringIsRejected) {
  try {
    StopStringMatcher matcher({"ok", ""});
    FAIL() << "expected mb::Error";
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find("stop string 1 is empty"), std::string::npos) << error.what();
  }
}

// The reference behaviour on the whole text: cut before the occurrence that ends first, the
// earliest-starting one among those ending together.
std::string reference_output(const std::string& text, const std::vector<std::string>& stops, bool* stopped) {
  size_t best_start = std::string::npos;
  size_t best_end = std::string::npos;
  for (const std::string& stop : stops) {
    const size_t start = text.find(stop);
    if (start == std::string::npos) continue;
    const size_t end = start + stop.size();
    if (end < best_end || (end == best_end && start < best_start)) {
      best_start = start;
      best_end = end;
    }
  }
  *stopped = best_start != std::string::npos;
  return *stopped ? text.substr(0, best_start) : text;
}

// Length of the longest suffix of `text` that is a proper prefix of some stop string.
size_t reference_holdback(const std::string& text, const std::vector<std::string>& stops) {
  size_t longest = 0;
  for (const std::string& stop : stops) {
    for (size_t length = 1; length < stop.size() && length <= text.size(); ++length) {
      if (text.compare(text.size() - length, length, stop, 0, length) == 0) {
        longest = std::max(longest, length);
      }
    }
  }
  return longest;
}

TEST(StopStrings, AnySplitOfTheTextGivesTheSameOutputWithMinimalHoldback) {
  std::mt19937 rng(2024);
  const std::vector<std::vector<std::string>> stop_sets = {
      {"ab"}, {"aab", "ba"}, {"abcab", "cabc"}, {"abac", "bb", "cba"}, {"aaaa"}, {"abc", "c"}};
  for (int trial = 0; trial < 3000; ++trial) {
    const std::vector<std::string>& stops = stop_sets[trial % stop_sets.size()];
    std::string text;
    const size_t length = rng() % 24;
    for (size_t i = 0; i < length; ++i) text.push_back(static_cast<char>('a' + rng() % 3));

    StopStringMatcher matcher(stops);
    std::string emitted;
    size_t fed = 0;
    while (fed < text.size() && !matcher.stopped()) {
      const size_t piece = std::min(text.size() - fed, static_cast<size_t>(rng() % 5));
      emitted += matcher.push(std::string_view(text).substr(fed, piece));
      fed += piece;
      const std::string seen = text.substr(0, fed);
      bool stopped_by_now = false;
      const std::string expected_so_far = reference_output(seen, stops, &stopped_by_now);
      ASSERT_EQ(matcher.stopped(), stopped_by_now) << "text '" << text << "' after " << fed;
      if (!stopped_by_now) {
        ASSERT_EQ(emitted, seen.substr(0, seen.size() - reference_holdback(seen, stops)))
            << "text '" << text << "' after " << fed;
      }
    }
    emitted += matcher.flush();
    bool stopped = false;
    ASSERT_EQ(emitted, reference_output(text, stops, &stopped)) << "text '" << text << "'";
    ASSERT_EQ(matcher.stopped(), stopped);
  }
}

}  // namespace
}  // namespace mb

// SPDX-License-Identifier: MIT
// A compiled Oniguruma regex, the engine Hugging Face's tokenizers runs its Split and ByteLevel
// patterns on (through the Rust `onig` crate), so that any pattern in a tokenizer.json matches
// here as it does there. The C library stays behind this class: oniguruma.h is only included by
// onig_regex.cc.
//
// The build links Debian 12's Oniguruma 6.9.8; Hugging Face's tokenizers 0.23 bundles a 6.9.10
// snapshot. What differs between the two is their Unicode tables (14.0 and 16.0: characters
// assigned since 2021 have no category in 6.9.8) and POSIX [[:punct:]], which 6.9.9 widened from
// \p{P} to \p{P} plus \p{S}; no known tokenizer pattern uses it. The matching rules (backtracking
// order, look-around, case folding, the find-all loop) are the same.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

// Oniguruma's regex_t, OnigRegion and OnigMatchParam.
struct re_pattern_buffer;
struct re_registers;
struct OnigMatchParamStruct;

namespace mb::tok {

// One match as byte offsets into the searched text; `begin == end` for an empty match.
struct RegexMatch {
  size_t begin = 0;
  size_t end = 0;
};

// Bounds on the backtracking of regex searches (see RegexBudget). A search that reaches one
// throws mb::Error instead of backtracking on without end.
struct RegexSearchLimits {
  // Steps at one start position: Oniguruma's default, which Hugging Face keeps.
  unsigned long retries_in_match = 10'000'000;
  // Steps of all the searches a budget pays for: this many per byte of the texts scanned, plus
  // a constant. Real patterns take under 32 per byte (split_test.cc measures them); the
  // exponential and polynomial ones that only a hostile file holds run into it, so no pattern
  // backtracks more than linearly in the text.
  unsigned long retries_per_byte = 256;
  unsigned long retries_slack = 1'000'000;
  // The limit a search first gets, doubled until it completes (see onig_regex.cc).
  unsigned long first_search_retries = 16;
};

// The backtracking steps that the find-all scans of one piece of work (one encode) may still
// take: the limits' constant to start with, plus retries_per_byte for every byte scanned.
class RegexBudget {
 public:
  explicit RegexBudget(const RegexSearchLimits& limits = {})
      : limits_(limits), granted_(limits.retries_slack), left_(limits.retries_slack) {}

  const RegexSearchLimits& limits() const { return limits_; }

 private:
  friend class OnigurumaRegex;
  RegexSearchLimits limits_;
  unsigned long granted_;  // the constant and every byte's share so far
  unsigned long left_;
};

class OnigurumaRegex {
 public:
  // Compiles `pattern` as the `onig` crate's Regex::new does: Oniguruma's default syntax,
  // UTF-8, no options. Throws mb::Error naming `source` and the pattern when it is not valid
  // UTF-8 or does not compile (the message is then Oniguruma's own).
  OnigurumaRegex(std::string_view pattern, const std::string& source);
  ~OnigurumaRegex();
  OnigurumaRegex(const OnigurumaRegex&) = delete;
  OnigurumaRegex& operator=(const OnigurumaRegex&) = delete;

  const std::string& pattern() const { return pattern_; }

  // Appends the matches of a find-all scan over `text` (valid UTF-8), exactly as the `onig`
  // crate's find_iter yields them: leftmost-first, non-overlapping, each search starting where
  // the last match ended; an empty match is kept unless it ends where the previous match
  // ended, in which case the search moves on by one character. Safe to call from several
  // threads at once: every call has its own region and match parameters. Throws mb::Error
  // naming `source` and the pattern when the scan exceeds `budget` (which it adds the text's
  // share to first, and charges for what it may have cost); the matches are those of an
  // unlimited scan otherwise.
  void find_all(std::string_view text, std::vector<RegexMatch>& matches, const std::string& source,
                RegexBudget& budget) const;
  // The same with a budget of its own.
  void find_all(std::string_view text, std::vector<RegexMatch>& matches, const std::string& source,
                const RegexSearchLimits& limits = {}) const {
    RegexBudget budget(limits);
    find_all(text, matches, source, budget);
  }

 private:
  // One search from `start`, within what is left of `budget`, which it reduces by what it may
  // have cost; returns onig_search's result.
  int search(const unsigned char* str, const unsigned char* end, const unsigned char* start,
             re_registers* region, OnigMatchParamStruct* param, RegexBudget& budget) const;

  re_pattern_buffer* regex_ = nullptr;
  std::string pattern_;
};

// The pattern that matches `literal` and nothing else, escaped as Hugging Face escapes the
// String patterns of Split pre-tokenizers (the Rust regex crate's regex::escape: a backslash
// before each of \ . + * ? ( ) | [ ] { } ^ $ # & - ~).
std::string escape_regex_literal(std::string_view literal);

}  // namespace mb::tok

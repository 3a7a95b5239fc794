// SPDX-License-Identifier: MIT
// Hand-written equivalents of the three most common pre-tokenization regexes of byte-level BPE
// tokenizer.json files, the fast path of split.h: each known pattern string is recognized and
// executed by a dedicated matcher that reproduces the backtracking (leftmost-first) semantics
// of Oniguruma, the engine Hugging Face uses (and split.h uses for every other pattern);
// tests/tokenizer/split_test.cc checks them against Oniguruma match for match.
#pragma once

#include <optional>
#include <string_view>
#include <vector>

#include "tokenizer/onig_regex.h"

namespace mb::tok {

enum class SplitPattern {
  // 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
  Gpt2,
  // (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|
  // ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
  Llama3,
  // The Llama-3 pattern with \p{N} instead of \p{N}{1,3}: every digit is its own piece.
  Qwen2,
};

inline constexpr std::string_view kGpt2PatternRegex =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";
inline constexpr std::string_view kLlama3PatternRegex =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
inline constexpr std::string_view kQwen2PatternRegex =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

// Returns the matcher for a regex exactly as written in a tokenizer.json, if there is one.
std::optional<SplitPattern> recognize_split_pattern(std::string_view regex);

// Appends the matches of a find-all scan of the pattern over `text` (valid UTF-8), exactly as
// OnigurumaRegex::find_all finds them (none of the three patterns matches the empty string).
void find_pattern_matches(std::string_view text, SplitPattern pattern, std::vector<RegexMatch>& matches);

// Appends the pieces of `text` (valid UTF-8) in order: every match of the pattern as found by
// a find-all scan, and every unmatched gap between matches as a piece of its own (Hugging
// Face's "Isolated" split behaviour). The pieces point into `text` and are never empty.
void split_isolated(std::string_view text, SplitPattern pattern, std::vector<std::string_view>& pieces);

}  // namespace mb::tok

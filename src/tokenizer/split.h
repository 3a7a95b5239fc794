// SPDX-License-Identifier: MIT
// The Split pre-tokenizer of tokenizer.json, with Hugging Face's semantics: a pattern (a regex,
// or a literal string) is searched find-all over each piece, the matches and the gaps between
// them are marked, `invert` swaps the marks, and the behavior decides which spans become pieces
// and which are merged or dropped. Patterns run on Oniguruma (onig_regex.h), as in Hugging
// Face's tokenizers; the GPT-2, Llama-3 and Qwen2 regexes run on the hand-written matchers of
// split_patterns.h instead, which tests/tokenizer/split_test.cc proves equal to Oniguruma.
#pragma once

#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/onig_regex.h"
#include "tokenizer/split_patterns.h"

namespace mb::tok {

// Hugging Face's SplitDelimiterBehavior: what becomes of the matched spans ("delimiters").
enum class SplitBehavior {
  Removed,             // matches are dropped, gaps kept
  Isolated,            // matches and gaps are pieces of their own
  MergedWithPrevious,  // a match joins the span before it
  MergedWithNext,      // a match joins the span after it
  Contiguous,          // consecutive matches (or gaps) form one piece
};

// A span of Hugging Face's Pattern::find_matches: the spans cover the text in order, each a
// match (possibly empty) or a non-empty gap between matches.
struct SplitSpan {
  size_t begin = 0;
  size_t end = 0;
  bool is_match = false;
};

// The spans of `text` for `matches` (in order, non-overlapping), with the marks swapped when
// `invert` is set. An empty text gives one unmatched empty span, as in Hugging Face.
void match_spans(std::string_view text, const std::vector<RegexMatch>& matches, bool invert,
                 std::vector<SplitSpan>& spans);

// Hugging Face's NormalizedString::split: appends the non-empty pieces that `behavior` makes of
// `spans`, as views into `text`.
void split_spans(std::string_view text, const std::vector<SplitSpan>& spans, SplitBehavior behavior,
                 std::vector<std::string_view>& pieces);

class SplitPreTokenizer {
 public:
  // Reads {"type": "Split", "pattern": {"Regex": ...} or {"String": ...}, "behavior": ...,
  // "invert": ...}; behavior and invert default to Isolated and false. Throws mb::Error naming
  // `source` and the pattern when the pattern is missing, too long or does not compile, or the
  // behavior is unknown.
  static SplitPreTokenizer from_json(const nlohmann::json& config, const std::string& source);

  // Appends the pieces of `text` (valid UTF-8). Throws mb::Error naming `source` when the
  // regex's searches exceed `budget`.
  void apply(std::string_view text, std::vector<std::string_view>& pieces, const std::string& source,
             RegexBudget& budget) const;

  // Whether the hand-written matcher runs instead of Oniguruma.
  bool uses_fast_path() const { return fast_.has_value(); }

 private:
  std::optional<SplitPattern> fast_;
  // Shared by the copies of a tokenizer: a compiled regex is only read when searching.
  std::shared_ptr<const OnigurumaRegex> regex_;
  SplitBehavior behavior_ = SplitBehavior::Isolated;
  bool invert_ = false;
};

}  // namespace mb::tok

// SPDX-License-Identifier: MIT
#include "tokenizer/split_patterns.h"

#include <algorithm>
#include <cstdint>

#include "tokenizer/unicode.h"
#include "tokenizer/utf8.h"

namespace mb::tok {

namespace {

enum CharClass : uint8_t { kLetter = 1, kNumber = 2, kSpace = 4 };

// The text decoded once into code points with their classes, so the matchers can look ahead
// and backtrack by index.
struct ClassifiedText {
  std::vector<char32_t> chars;
  std::vector<uint8_t> classes;
  std::vector<size_t> offsets;  // byte offset of each char, plus the total length at the end

  explicit ClassifiedText(std::string_view text) {
    chars.reserve(text.size());
    classes.reserve(text.size());
    offsets.reserve(text.size() + 1);
    size_t pos = 0;
    while (pos < text.size()) {
      offsets.push_back(pos);
      const char32_t c = next_code_point(text, pos);
      chars.push_back(c);
      uint8_t cls = 0;
      if (is_letter(c)) {
        cls = kLetter;
      } else if (is_number(c)) {
        cls = kNumber;
      } else if (is_white_space(c)) {
        cls = kSpace;
      }
      classes.push_back(cls);
    }
    offsets.push_back(text.size());
  }

  size_t size() const { return chars.size(); }
  bool letter(size_t i) const { return i < size() && classes[i] == kLetter; }
  bool number(size_t i) const { return i < size() && classes[i] == kNumber; }
  bool space(size_t i) const { return i < size() && classes[i] == kSpace; }
  // [^\s\p{L}\p{N}]
  bool other(size_t i) const { return i < size() && classes[i] == 0; }
  bool line_break(size_t i) const { return i < size() && (chars[i] == '\r' || chars[i] == '\n'); }
  char32_t at(size_t i) const { return i < size() ? chars[i] : 0; }

  template <typename Predicate>
  size_t run(size_t i, Predicate predicate) const {
    size_t end = i;
    while (end < size() && predicate(end)) ++end;
    return end - i;
  }
};

// Case folding restricted to the letters of the contraction alternatives. Oniguruma folds with
// the Unicode tables, under which U+017F LATIN SMALL LETTER LONG S also matches 's'; no other
// character folds to one of these letters.
char32_t fold_contraction_letter(char32_t c) {
  if (c >= 'A' && c <= 'Z') return c - 'A' + 'a';
  if (c == 0x017F) return 's';
  return c;
}

// 's|'t|'re|'ve|'m|'ll|'d, optionally case-insensitive; returns the match length or 0.
size_t match_contraction(const ClassifiedText& t, size_t i, bool ignore_case) {
  if (t.at(i) != '\'') return 0;
  const auto letter = [&](size_t k) { return ignore_case ? fold_contraction_letter(t.at(k)) : t.at(k); };
  const char32_t first = letter(i + 1);
  if (first == 's' || first == 't' || first == 'm' || first == 'd') return 2;
  const char32_t second = letter(i + 2);
  if ((first == 'r' && second == 'e') || (first == 'v' && second == 'e') || (first == 'l' && second == 'l')) {
    return 3;
  }
  return 0;
}

// \s+(?!\S)|\s+ : a run of white space keeps its last character for the following word unless
// the run reaches the end of the text (the look-ahead backtracks by exactly one character).
size_t match_trailing_space(const ClassifiedText& t, size_t i) {
  const size_t run = t.run(i, [&](size_t k) { return t.space(k); });
  if (run == 0) return 0;
  if (i + run == t.size() || run == 1) return run;
  return run - 1;
}

size_t match_gpt2(const ClassifiedText& t, size_t i) {
  if (size_t n = match_contraction(t, i, false)) return n;
  // ` ?\p{L}+`, ` ?\p{N}+` and ` ?[^\s\p{L}\p{N}]+`: an optional leading space, then a run.
  const size_t after_space = t.at(i) == ' ' ? i + 1 : i;
  if (t.letter(after_space))
    return after_space - i + t.run(after_space, [&](size_t k) { return t.letter(k); });
  if (t.letter(i)) return t.run(i, [&](size_t k) { return t.letter(k); });
  if (t.number(after_space))
    return after_space - i + t.run(after_space, [&](size_t k) { return t.number(k); });
  if (t.number(i)) return t.run(i, [&](size_t k) { return t.number(k); });
  if (t.other(after_space)) return after_space - i + t.run(after_space, [&](size_t k) { return t.other(k); });
  if (t.other(i)) return t.run(i, [&](size_t k) { return t.other(k); });
  return match_trailing_space(t, i);
}

size_t match_llama3(const ClassifiedText& t, size_t i, size_t max_digits) {
  if (size_t n = match_contraction(t, i, true)) return n;
  // [^\r\n\p{L}\p{N}]?\p{L}+
  if (!t.letter(i) && !t.number(i) && !t.line_break(i) && t.letter(i + 1)) {
    return 1 + t.run(i + 1, [&](size_t k) { return t.letter(k); });
  }
  if (t.letter(i)) return t.run(i, [&](size_t k) { return t.letter(k); });
  // \p{N}{1,3} (or \p{N} for Qwen2)
  if (t.number(i)) return std::min(max_digits, t.run(i, [&](size_t k) { return t.number(k); }));
  // ` ?[^\s\p{L}\p{N}]+[\r\n]*`
  const size_t start = t.at(i) == ' ' && t.other(i + 1) ? i + 1 : i;
  if (t.other(start)) {
    size_t end = start + t.run(start, [&](size_t k) { return t.other(k); });
    end += t.run(end, [&](size_t k) { return t.line_break(k); });
    return end - i;
  }
  // \s*[\r\n]+ : greedy white space backtracks to the last line break inside the run.
  const size_t run = t.run(i, [&](size_t k) { return t.space(k); });
  for (size_t end = i + run; end > i; --end) {
    if (t.line_break(end - 1)) return end - i;
  }
  return match_trailing_space(t, i);
}

size_t match_at(const ClassifiedText& t, size_t i, SplitPattern pattern) {
  switch (pattern) {
    case SplitPattern::Gpt2:
      return match_gpt2(t, i);
    case SplitPattern::Llama3:
      return match_llama3(t, i, 3);
    case SplitPattern::Qwen2:
      return match_llama3(t, i, 1);
  }
  return 0;
}

}  // namespace

std::optional<SplitPattern> recognize_split_pattern(std::string_view regex) {
  if (regex == kGpt2PatternRegex) return SplitPattern::Gpt2;
  if (regex == kLlama3PatternRegex) return SplitPattern::Llama3;
  if (regex == kQwen2PatternRegex) return SplitPattern::Qwen2;
  return std::nullopt;
}

void find_pattern_matches(std::string_view text, SplitPattern pattern, std::vector<RegexMatch>& matches) {
  if (text.empty()) return;
  const ClassifiedText t(text);
  size_t i = 0;
  while (i < t.size()) {
    const size_t length = match_at(t, i, pattern);
    if (length == 0) {
      ++i;
      continue;
    }
    matches.push_back({t.offsets[i], t.offsets[i + length]});
    i += length;
  }
}

void split_isolated(std::string_view text, SplitPattern pattern, std::vector<std::string_view>& pieces) {
  std::vector<RegexMatch> matches;
  find_pattern_matches(text, pattern, matches);
  size_t gap_start = 0;
  for (const RegexMatch& match : matches) {
    if (gap_start < match.begin) pieces.push_back(text.substr(gap_start, match.begin - gap_start));
    pieces.push_back(text.substr(match.begin, match.end - match.begin));
    gap_start = match.end;
  }
  if (gap_start < text.size()) pieces.push_back(text.substr(gap_start));
}

}  // namespace mb::tok

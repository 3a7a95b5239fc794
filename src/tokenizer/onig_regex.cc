// SPDX-License-Identifier: MIT
#include "tokenizer/onig_regex.h"

#include <oniguruma.h>

#include <algorithm>
#include <climits>
#include <memory>
#include <mutex>
#include <optional>

#include "core/error.h"
#include "tokenizer/utf8.h"

namespace mb::tok {

namespace {

// Oniguruma's one piece of global state: its encoding tables, set up once for UTF-8 before
// the first pattern is compiled (onig_initialize is not safe to race with itself).
void initialize_oniguruma() {
  static std::once_flag once;
  std::call_once(once, [] {
    OnigEncoding encodings[] = {ONIG_ENCODING_UTF8};
    onig_initialize(encodings, 1);
  });
}

// Patterns and texts are echoed in messages at most this long, cut at a character boundary.
std::string excerpt(std::string_view text) {
  constexpr size_t kMaxBytes = 200;
  if (text.size() <= kMaxBytes) return std::string(text);
  size_t end = kMaxBytes;
  while (end > 0 && (static_cast<unsigned char>(text[end]) & 0xC0) == 0x80) --end;
  return std::string(text.substr(0, end)) + "...";
}

std::string error_text(int code, OnigErrorInfo* info = nullptr) {
  OnigUChar message[ONIG_MAX_ERROR_MESSAGE_LEN];
  if (info != nullptr) {
    onig_error_code_to_str(message, code, info);
  } else {
    onig_error_code_to_str(message, code);
  }
  return reinterpret_cast<const char*>(message);
}

struct RegionDeleter {
  void operator()(OnigRegion* region) const { onig_region_free(region, 1); }
};
struct MatchParamDeleter {
  void operator()(OnigMatchParam* param) const { onig_free_match_param(param); }
};

// The length of the character that starts at `pos` of valid UTF-8 (1 past the end, as Rust's
// `chars().next().map(len_utf8).unwrap_or(1)` gives).
size_t char_length_at(std::string_view text, size_t pos) {
  if (pos >= text.size()) return 1;
  const auto lead = static_cast<unsigned char>(text[pos]);
  if (lead < 0x80) return 1;
  if (lead < 0xE0) return 2;
  if (lead < 0xF0) return 3;
  return 4;
}

}  // namespace

OnigurumaRegex::OnigurumaRegex(std::string_view pattern, const std::string& source) : pattern_(pattern) {
  // Oniguruma does not check the pattern's encoding (JSON strings are valid UTF-8, but the
  // class takes any bytes).
  if (!is_valid_utf8(pattern_)) {
    throw Error(source + ": the regex '" + to_valid_utf8(excerpt(pattern_)) + "' is not valid UTF-8");
  }
  initialize_oniguruma();
  const auto* begin = reinterpret_cast<const OnigUChar*>(pattern_.data());
  OnigErrorInfo info{};
  const int code = onig_new(&regex_, begin, begin + pattern_.size(), ONIG_OPTION_NONE, ONIG_ENCODING_UTF8,
                            ONIG_SYNTAX_DEFAULT, &info);
  if (code != ONIG_NORMAL) {
    regex_ = nullptr;
    throw Error(source + ": the regex '" + excerpt(pattern_) +
                "' does not compile: " + error_text(code, &info));
  }
}

OnigurumaRegex::~OnigurumaRegex() {
  if (regex_ != nullptr) onig_free(regex_);
}

// Oniguruma does not report how many steps a search took, only whether it stayed within the
// limit it was given. So each search first gets a small limit, doubled until the search
// completes; the limits of the failed tries and of the successful one bound what the search
// cost from above, and are charged to the budget. A search taking r steps is charged less than
// 4 r + first_search_retries (and costs less than 2 r in repeated work).
int OnigurumaRegex::search(const unsigned char* str, const unsigned char* end, const unsigned char* start,
                           OnigRegion* region, OnigMatchParam* param, RegexBudget& budget) const {
  // A limit of 0 would mean none at all to Oniguruma.
  if (budget.left_ == 0) return ONIGERR_RETRY_LIMIT_IN_SEARCH_OVER;
  unsigned long limit = std::min(std::max(budget.limits_.first_search_retries, 1UL), budget.left_);
  for (;;) {
    onig_set_retry_limit_in_search_of_match_param(param, limit);
    const int found = onig_search_with_param(regex_, str, end, start, end, region, ONIG_OPTION_NONE, param);
    budget.left_ -= limit;
    if (found != ONIGERR_RETRY_LIMIT_IN_SEARCH_OVER || budget.left_ == 0) return found;
    limit = std::min(limit * 2, budget.left_);
  }
}

void OnigurumaRegex::find_all(std::string_view text, std::vector<RegexMatch>& matches,
                              const std::string& source, RegexBudget& budget) const {
  // Oniguruma reports offsets as int.
  if (text.size() > static_cast<size_t>(INT_MAX)) {
    throw Error(source + ": a " + std::to_string(text.size()) + "-byte text is too long for the regex '" +
                excerpt(pattern_) + "'");
  }
  const RegexSearchLimits& limits = budget.limits_;
  const unsigned long share = limits.retries_per_byte * text.size();
  budget.granted_ += share;
  budget.left_ += share;
  const std::unique_ptr<OnigRegion, RegionDeleter> region(onig_region_new());
  const std::unique_ptr<OnigMatchParam, MatchParamDeleter> param(onig_new_match_param());
  if (!region || !param) throw std::bad_alloc();
  onig_initialize_match_param(param.get());
  onig_set_retry_limit_in_match_of_match_param(param.get(), limits.retries_in_match);
  const auto* str = reinterpret_cast<const OnigUChar*>(text.data());
  const auto* end = str + text.size();
  size_t last_end = 0;
  std::optional<size_t> last_match_end;
  while (last_end <= text.size()) {
    const int found = search(str, end, str + last_end, region.get(), param.get(), budget);
    if (found == ONIG_MISMATCH) break;
    if (found == ONIGERR_RETRY_LIMIT_IN_SEARCH_OVER) {
      throw Error(source + ": the regex '" + excerpt(pattern_) + "' backtracks more than " +
                  std::to_string(budget.granted_) + " steps on a " + std::to_string(text.size()) +
                  "-byte text (its limit: " + std::to_string(limits.retries_slack) + " plus " +
                  std::to_string(limits.retries_per_byte) + " per byte searched)");
    }
    if (found < 0) {
      throw Error(source + ": the regex '" + excerpt(pattern_) + "' failed on a " +
                  std::to_string(text.size()) + "-byte text: " + error_text(found));
    }
    const auto begin = static_cast<size_t>(region->beg[0]);
    const auto finish = static_cast<size_t>(region->end[0]);
    // An empty match where the previous match ended would be found again forever; the onig
    // crate skips it and searches again one character further on.
    if (begin == finish && last_match_end == finish) {
      last_end += char_length_at(text, last_end);
      continue;
    }
    last_end = finish;
    last_match_end = finish;
    matches.push_back({begin, finish});
  }
}

std::string escape_regex_literal(std::string_view literal) {
  constexpr std::string_view kMeta = "\\.+*?()|[]{}^$#&-~";
  std::string escaped;
  escaped.reserve(literal.size() * 2);
  for (char c : literal) {
    if (kMeta.find(c) != std::string_view::npos) escaped += '\\';
    escaped += c;
  }
  return escaped;
}

}  // namespace mb::tok

// SPDX-License-Identifier: MIT
#include "tokenizer/split.h"

#include <algorithm>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/json_text.h"
#include "tokenizer/pipeline_json.h"
#include "tokenizer/pipeline_limits.h"

namespace mb::tok {

namespace {

using nlohmann::json;

SplitBehavior parse_behavior(const json& config, const std::string& source) {
  const auto it = config.find("behavior");
  if (it == config.end() || it->is_null()) return SplitBehavior::Isolated;
  const std::string name = it->is_string() ? it->get<std::string>() : "";
  if (name == "Removed") return SplitBehavior::Removed;
  if (name == "Isolated") return SplitBehavior::Isolated;
  if (name == "MergedWithPrevious") return SplitBehavior::MergedWithPrevious;
  if (name == "MergedWithNext") return SplitBehavior::MergedWithNext;
  if (name == "Contiguous") return SplitBehavior::Contiguous;
  throw Error(source + ": unknown Split behavior " + json_excerpt(*it) +
              " (expected Removed, Isolated, MergedWithPrevious, MergedWithNext or Contiguous)");
}

// The regex a Split pattern compiles to: a Regex as written, a String escaped to match itself
// (as Hugging Face does, so an empty String matches the empty string everywhere).
std::string parse_pattern(const json& config, const std::string& source) {
  const auto it = config.find("pattern");
  const bool regex = it != config.end() && it->is_object() && it->size() == 1 && it->contains("Regex") &&
                     it->at("Regex").is_string();
  const bool literal = it != config.end() && it->is_object() && it->size() == 1 && it->contains("String") &&
                       it->at("String").is_string();
  if (!regex && !literal) {
    throw Error(source +
                ": Split pre-tokenizer needs a pattern {\"Regex\": \"...\"} or {\"String\": \"...\"}" +
                (it == config.end() ? std::string() : ", got " + json_excerpt(*it)));
  }
  const std::string text = it->at(regex ? "Regex" : "String").get<std::string>();
  if (text.size() > kMaxSplitPatternBytes) {
    throw Error(source + ": Split pattern of " + std::to_string(text.size()) + " bytes, more than " +
                std::to_string(kMaxSplitPatternBytes));
  }
  return regex ? text : escape_regex_literal(text);
}

}  // namespace

void match_spans(std::string_view text, const std::vector<RegexMatch>& matches, bool invert,
                 std::vector<SplitSpan>& spans) {
  if (text.empty()) {
    spans.push_back({0, 0, invert});
    return;
  }
  size_t previous = 0;
  for (const RegexMatch& match : matches) {
    if (previous != match.begin) spans.push_back({previous, match.begin, invert});
    spans.push_back({match.begin, match.end, !invert});
    previous = match.end;
  }
  if (previous != text.size()) spans.push_back({previous, text.size(), invert});
}

void split_spans(std::string_view text, const std::vector<SplitSpan>& spans, SplitBehavior behavior,
                 std::vector<std::string_view>& pieces) {
  // The folds of Hugging Face's NormalizedString::split, over [begin, end) pairs; a span
  // "joins" the last piece by moving that piece's end (or, going backwards, its start).
  std::vector<std::pair<size_t, size_t>> kept;
  kept.reserve(spans.size());
  bool previous_match = false;
  switch (behavior) {
    case SplitBehavior::Isolated:
      for (const SplitSpan& span : spans) kept.emplace_back(span.begin, span.end);
      break;
    case SplitBehavior::Removed:
      for (const SplitSpan& span : spans) {
        if (!span.is_match) kept.emplace_back(span.begin, span.end);
      }
      break;
    case SplitBehavior::Contiguous:
      for (const SplitSpan& span : spans) {
        if (span.is_match == previous_match && !kept.empty()) {
          kept.back().second = span.end;
        } else {
          kept.emplace_back(span.begin, span.end);
        }
        previous_match = span.is_match;
      }
      break;
    case SplitBehavior::MergedWithPrevious:
      for (const SplitSpan& span : spans) {
        if (span.is_match && !previous_match && !kept.empty()) {
          kept.back().second = span.end;
        } else {
          kept.emplace_back(span.begin, span.end);
        }
        previous_match = span.is_match;
      }
      break;
    case SplitBehavior::MergedWithNext:
      for (auto span = spans.rbegin(); span != spans.rend(); ++span) {
        if (span->is_match && !previous_match && !kept.empty()) {
          kept.back().first = span->begin;
        } else {
          kept.emplace_back(span->begin, span->end);
        }
        previous_match = span->is_match;
      }
      std::reverse(kept.begin(), kept.end());
      break;
  }
  for (const auto& [begin, end] : kept) {
    if (begin < end) pieces.push_back(text.substr(begin, end - begin));
  }
}

SplitPreTokenizer SplitPreTokenizer::from_json(const json& config, const std::string& source) {
  SplitPreTokenizer split;
  const std::string pattern = parse_pattern(config, source);
  split.behavior_ = parse_behavior(config, source);
  split.invert_ = bool_field(config, "invert", false, source, "pre_tokenizer");
  split.fast_ = recognize_split_pattern(pattern);
  if (!split.fast_) split.regex_ = std::make_shared<const OnigurumaRegex>(pattern, source);
  return split;
}

void SplitPreTokenizer::apply(std::string_view text, std::vector<std::string_view>& pieces,
                              const std::string& source, RegexBudget& budget) const {
  std::vector<RegexMatch> matches;
  if (fast_) {
    find_pattern_matches(text, *fast_, matches);
  } else {
    regex_->find_all(text, matches, source, budget);
  }
  std::vector<SplitSpan> spans;
  spans.reserve(matches.size() * 2 + 1);
  match_spans(text, matches, invert_, spans);
  split_spans(text, spans, behavior_, pieces);
}

}  // namespace mb::tok

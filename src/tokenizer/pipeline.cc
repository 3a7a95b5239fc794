// SPDX-License-Identifier: MIT
#include "tokenizer/pipeline.h"

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/pipeline_limits.h"
#include "tokenizer/utf8.h"

namespace mb::tok {

namespace {

using nlohmann::json;
using NormalizerStep = std::variant<NormalForm, PrependStep, ReplaceStep>;
using PreTokenizerStep = std::variant<SplitStep, ByteLevelStep, MetaspaceStep>;

// `depth` counts the Sequences around `config`.
void parse_normalizer(const json& config, const std::string& source, std::vector<NormalizerStep>& steps,
                      int depth = 0) {
  if (config.is_null()) return;
  const char* stage = "normalizer";
  const std::string type = stage_type(config, source, stage);
  if (type == "NFC") {
    steps.emplace_back(NormalForm::NFC);
  } else if (type == "NFD") {
    steps.emplace_back(NormalForm::NFD);
  } else if (type == "NFKC") {
    steps.emplace_back(NormalForm::NFKC);
  } else if (type == "NFKD") {
    steps.emplace_back(NormalForm::NFKD);
  } else if (type == "Prepend") {
    steps.emplace_back(PrependStep{string_field(config, "prepend", source, stage)});
  } else if (type == "Replace") {
    steps.emplace_back(
        ReplaceStep{string_pattern(config, source, stage), string_field(config, "content", source, stage)});
  } else if (type == "Sequence") {
    const json& entries = array_field(config, "normalizers", source, stage);
    check_sequence(source, stage, entries.size(), depth + 1);
    for (const json& step : entries) parse_normalizer(step, source, steps, depth + 1);
  } else {
    throw Error(source + ": unsupported normalizer type '" + type +
                "' (supported: NFC, NFD, NFKC, NFKD, Prepend, Replace, Sequence)");
  }
}

void parse_pre_tokenizer(const json& config, const std::string& source, std::vector<PreTokenizerStep>& steps,
                         int depth = 0) {
  if (config.is_null()) return;
  const char* stage = "pre_tokenizer";
  const std::string type = stage_type(config, source, stage);
  if (type == "ByteLevel") {
    steps.emplace_back(ByteLevelStep{bool_field(config, "add_prefix_space", true, source, stage),
                                     bool_field(config, "use_regex", true, source, stage)});
  } else if (type == "Split") {
    steps.emplace_back(SplitStep{SplitPreTokenizer::from_json(config, source)});
  } else if (type == "Metaspace") {
    const MetaspaceOptions options = metaspace_options(config, source, stage);
    MetaspaceStep step{std::string(), options.prepend, options.split};
    append_utf8(step.replacement, options.replacement);
    steps.emplace_back(std::move(step));
  } else if (type == "Sequence") {
    const json& entries = array_field(config, "pretokenizers", source, stage);
    check_sequence(source, stage, entries.size(), depth + 1);
    for (const json& step : entries) parse_pre_tokenizer(step, source, steps, depth + 1);
  } else {
    throw Error(source + ": unsupported pre_tokenizer type '" + type +
                "' (supported: ByteLevel, Split, Metaspace, Sequence)");
  }
}

// What every pre-tokenizer step of one run may need: the file name for errors, and the
// backtracking budget its regexes share.
struct StepContext {
  const std::string& source;
  RegexBudget& regex_budget;
};

void apply_step(const SplitStep& step, std::string_view piece, bool, const StepContext& context,
                std::vector<std::string>& out) {
  std::vector<std::string_view> parts;
  step.split.apply(piece, parts, context.source, context.regex_budget);
  for (std::string_view part : parts) out.emplace_back(part);
}

void apply_step(const ByteLevelStep& step, std::string_view piece, bool, const StepContext&,
                std::vector<std::string>& out) {
  std::string prefixed;
  if (step.add_prefix_space && (piece.empty() || piece.front() != ' ')) {
    prefixed = " ";
    prefixed += piece;
    piece = prefixed;
  }
  std::vector<std::string_view> parts;
  if (step.use_regex) {
    split_isolated(piece, SplitPattern::Gpt2, parts);
  } else if (!piece.empty()) {
    parts.push_back(piece);
  }
  for (std::string_view part : parts) {
    std::string mapped;
    mapped.reserve(part.size() * 2);
    append_byte_level(mapped, part);
    out.push_back(std::move(mapped));
  }
}

// Hugging Face replaces the spaces first, so a piece that starts with a space gets no second
// marker, then cuts before every marker (SplitDelimiterBehavior::MergedWithNext).
void apply_step(const MetaspaceStep& step, std::string_view piece, bool at_input_start, const StepContext&,
                std::vector<std::string>& out) {
  std::string text(piece);
  replace_all(text, " ", step.replacement);
  const bool prepend =
      step.prepend == PrependScheme::Always || (step.prepend == PrependScheme::First && at_input_start);
  if (prepend && !text.starts_with(step.replacement)) text.insert(0, step.replacement);
  if (!step.split) {
    out.push_back(std::move(text));
    return;
  }
  size_t start = 0;
  for (size_t at = text.find(step.replacement, 1); at != std::string::npos;
       at = text.find(step.replacement, at + 1)) {
    out.push_back(text.substr(start, at - start));
    start = at;
  }
  out.push_back(text.substr(start));
}

}  // namespace

bool replace_all(std::string& text, std::string_view pattern, std::string_view content, size_t max_bytes) {
  std::string result;
  size_t from = 0;
  for (size_t at = text.find(pattern); at != std::string::npos; at = text.find(pattern, from)) {
    // Checked before appending, so a growing text never holds more than max_bytes.
    if (result.size() + (at - from) + content.size() > max_bytes) return false;
    result.append(text, from, at - from);
    result.append(content);
    from = at + pattern.size();
  }
  if (from == 0) return text.size() <= max_bytes;
  if (result.size() + (text.size() - from) > max_bytes) return false;
  result.append(text, from, std::string::npos);
  text.swap(result);
  return true;
}

Normalizer Normalizer::from_json(const json& config, const std::string& source) {
  Normalizer normalizer;
  normalizer.source_ = source;
  parse_normalizer(config, source, normalizer.steps_);
  check_step_count(source, "normalizer", normalizer.steps_.size());
  return normalizer;
}

std::string Normalizer::apply(std::string_view valid_text) const {
  std::string text(valid_text);
  if (steps_.empty()) return text;
  PipelineBudget budget(source_, "normalizer", valid_text.size());
  for (const NormalizerStep& step : steps_) {
    if (const auto* form = std::get_if<NormalForm>(&step)) {
      // A normal form grows a text at most eighteenfold (NFKD of U+FDFA), so its result is
      // bounded although it is measured only once built.
      text = normalize(text, *form);
    } else if (const auto* prepend = std::get_if<PrependStep>(&step)) {
      if (!text.empty()) {
        if (text.size() + prepend->prefix.size() > budget.max_bytes()) budget.fail_length();
        text.insert(0, prepend->prefix);
      }
    } else if (const auto* replace = std::get_if<ReplaceStep>(&step)) {
      if (!replace_all(text, replace->pattern, replace->content, budget.max_bytes())) budget.fail_length();
    }
    budget.charge(text.size());
  }
  return text;
}

PreTokenizer PreTokenizer::from_json(const json& config, const std::string& source) {
  PreTokenizer pre_tokenizer;
  pre_tokenizer.source_ = source;
  parse_pre_tokenizer(config, source, pre_tokenizer.steps_);
  check_step_count(source, "pre_tokenizer", pre_tokenizer.steps_.size());
  return pre_tokenizer;
}

PreTokenizer PreTokenizer::gpt2() {
  PreTokenizer pre_tokenizer;
  pre_tokenizer.steps_.emplace_back(ByteLevelStep{false, true});
  return pre_tokenizer;
}

void PreTokenizer::apply(std::string_view text, std::vector<std::string>& words, bool at_input_start,
                         RegexBudget* regex_budget) const {
  if (text.empty()) return;
  RegexBudget own_budget;
  const StepContext context{source_, regex_budget != nullptr ? *regex_budget : own_budget};
  std::vector<std::string> pieces{std::string(text)};
  std::vector<std::string> next;
  PipelineBudget budget(source_, "pre_tokenizer", text.size());
  for (const auto& step : steps_) {
    next.clear();
    for (size_t i = 0; i < pieces.size(); ++i) {
      // Every step keeps the text in order and drops only empty pieces, so the first piece is the
      // one that begins where the input does.
      const bool at_start = at_input_start && i == 0;
      std::visit([&](const auto& s) { apply_step(s, pieces[i], at_start, context, next); }, step);
    }
    // A step grows its input at most eightfold (ByteLevel doubles every byte and may add a space
    // to each piece; Metaspace turns a space into a marker of up to four bytes and may prepend
    // one to each piece), so measuring after the step bounds it.
    size_t bytes = 0;
    for (const std::string& piece : next) bytes += piece.size();
    budget.charge(bytes);
    pieces.swap(next);
  }
  for (std::string& piece : pieces) {
    if (!piece.empty()) words.push_back(std::move(piece));
  }
}

}  // namespace mb::tok

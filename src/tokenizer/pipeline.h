// SPDX-License-Identifier: MIT
// The normalizer and pre-tokenizer stages of a tokenizer.json, restricted to what byte-level
// and SentencePiece-style BPE tokenizers use (decoder.h has the decoder). Anything else is
// refused when the file is loaded, with an error naming the file and the unsupported type,
// rather than silently tokenizing differently.
#pragma once

#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "tokenizer/pipeline_json.h"
#include "tokenizer/split.h"
#include "tokenizer/unicode.h"

namespace mb::tok {

// Prepends `prefix` to text that is not empty (Llama-2's "▁" word marker).
struct PrependStep {
  std::string prefix;
};

// Replaces every occurrence of the literal `pattern`, left to right, by `content`.
struct ReplaceStep {
  std::string pattern;
  std::string content;
};

class Normalizer {
 public:
  // Accepts null, NFC, NFD, NFKC, NFKD, Prepend, Replace with a String pattern, and a Sequence
  // of those.
  static Normalizer from_json(const nlohmann::json& config, const std::string& source);
  static Normalizer none() { return Normalizer(); }

  bool is_identity() const { return steps_.empty(); }
  // Throws mb::Error when a step makes the text longer, or all steps write more, than the
  // PipelineBudget of pipeline_limits.h allows.
  std::string apply(std::string_view valid_text) const;

 private:
  std::vector<std::variant<NormalForm, PrependStep, ReplaceStep>> steps_;
  std::string source_;
};

struct SplitStep {
  SplitPreTokenizer split;
};

struct ByteLevelStep {
  bool add_prefix_space = false;
  bool use_regex = true;
};

// SentencePiece's word marker: spaces become `replacement`, one is prepended as the scheme says,
// and with `split` every replacement character starts a new word.
struct MetaspaceStep {
  std::string replacement;
  PrependScheme prepend = PrependScheme::Always;
  bool split = true;
};

class PreTokenizer {
 public:
  // Accepts null, ByteLevel, Split (any Regex or String pattern, every behavior, inverted or
  // not), Metaspace, and a Sequence of those.
  static PreTokenizer from_json(const nlohmann::json& config, const std::string& source);
  // GPT-2's: ByteLevel without a prefix space, with the GPT-2 regex.
  static PreTokenizer gpt2();

  // Splits one piece of text into the words the model sees, appending them to `words`.
  // `at_input_start` says whether the piece begins at offset 0 of the text given to encode(),
  // which Metaspace's "first" prepend scheme asks (not after an added token, for instance).
  // Throws mb::Error when the steps outgrow the PipelineBudget of pipeline_limits.h, or their
  // regexes `regex_budget` (one for this call alone when null; encode() shares one among all the
  // pieces of its text).
  void apply(std::string_view text, std::vector<std::string>& words, bool at_input_start = true,
             RegexBudget* regex_budget = nullptr) const;

 private:
  std::vector<std::variant<SplitStep, ByteLevelStep, MetaspaceStep>> steps_;
  std::string source_;
};

// Replaces every occurrence of `pattern` (not empty), scanning left to right without overlaps.
// Returns false, leaving `text` as it was, when the result would be longer than `max_bytes`.
bool replace_all(std::string& text, std::string_view pattern, std::string_view content,
                 size_t max_bytes = SIZE_MAX);

}  // namespace mb::tok

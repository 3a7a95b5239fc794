// The normalizer, pre-tokenizer and decoder stages of a tokenizer.json, restricted to what
// byte-level BPE tokenizers use. Anything else is refused when the file is loaded, with an
// error naming the file and the unsupported type, rather than silently tokenizing differently.
#pragma once

#include <nlohmann/json_fwd.hpp>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "tokenizer/split_patterns.h"
#include "tokenizer/unicode.h"

namespace mb::tok {

class Normalizer {
 public:
  // Accepts null, NFC, NFD, NFKC, NFKD and a Sequence of those.
  static Normalizer from_json(const nlohmann::json& config, const std::string& source);
  static Normalizer none() { return Normalizer(); }

  bool is_identity() const { return forms_.empty(); }
  std::string apply(std::string_view valid_text) const;

 private:
  std::vector<NormalForm> forms_;
};

struct SplitStep {
  SplitPattern pattern;
};

struct ByteLevelStep {
  bool add_prefix_space = false;
  bool use_regex = true;
};

class PreTokenizer {
 public:
  // Accepts null, ByteLevel, Split with a recognized Regex pattern ("Isolated", not inverted),
  // and a Sequence of those.
  static PreTokenizer from_json(const nlohmann::json& config, const std::string& source);
  // GPT-2's: ByteLevel without a prefix space, with the GPT-2 regex.
  static PreTokenizer gpt2();

  // Splits one piece of text into the words the model sees, appending them to `words`.
  void apply(std::string_view text, std::vector<std::string>& words) const;

 private:
  std::vector<std::variant<SplitStep, ByteLevelStep>> steps_;
};

enum class DecoderKind {
  // No decoder: Hugging Face joins the token strings with single spaces.
  JoinWithSpaces,
  ByteLevel,
};

// Accepts null, ByteLevel and a Sequence containing only ByteLevel decoders.
DecoderKind decoder_from_json(const nlohmann::json& config, const std::string& source);

}  // namespace mb::tok

// SPDX-License-Identifier: MIT
// The decoder stage of a tokenizer.json: how a sequence of token strings becomes text.
//
// Byte-level files use the ByteLevel decoder, whose result per token is fixed and is therefore
// precomputed per id. SentencePiece-style files use a chain of steps (Replace "▁" by " ",
// ByteFallback, Fuse, Strip, or a Metaspace decoder) whose results depend on the neighbouring
// tokens: ByteFallback turns a run of <0xNN> tokens into one string, or into one U+FFFD per byte
// when the run is not valid UTF-8, and Strip and Metaspace treat the first token differently.
// ChainDecodeStream runs such a chain token by token with exactly Hugging Face's results, which
// lets generation stream text while decode() and the stream always agree.
#pragma once

#include <nlohmann/json_fwd.hpp>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace mb::tok {

enum class DecoderKind {
  // No decoder: Hugging Face joins the token strings with single spaces.
  JoinWithSpaces,
  ByteLevel,
  // A sequence of the steps below.
  Chain,
};

// Replaces every occurrence of `pattern` (a literal string) in each token by `content`.
struct ReplaceDecodeStep {
  std::string pattern;
  std::string content;
};

// Turns runs of <0x00>..<0xFF> tokens into the text their bytes spell.
struct ByteFallbackDecodeStep {};

// Joins all tokens into one, so that the steps after it see a single token.
struct FuseDecodeStep {};

// Removes up to `start` leading and up to `stop` trailing `content` characters of each token.
struct StripDecodeStep {
  char32_t content = ' ';
  size_t start = 0;
  size_t stop = 0;
};

// Turns each `replacement` character into a space, except in the first token, where they are
// dropped when the pre-tokenizer prepends one (prepend_scheme first or always).
struct MetaspaceDecodeStep {
  char32_t replacement = U'\u2581';
  bool drop_in_first_token = true;
};

using DecodeStep = std::variant<ReplaceDecodeStep, ByteFallbackDecodeStep, FuseDecodeStep, StripDecodeStep,
                                MetaspaceDecodeStep>;

struct Decoder {
  // Accepts null, ByteLevel, a Sequence of ByteLevel decoders, and the SentencePiece steps
  // (Replace with a String pattern, ByteFallback, Fuse, Strip, Metaspace) alone or in a Sequence.
  // Steps that need whole tokens (ByteFallback, a Replace of more than one character) must come
  // before any Fuse, after which a stream hands on the text in pieces. Throws mb::Error naming
  // `source` and the problem otherwise.
  static Decoder from_json(const nlohmann::json& config, const std::string& source);
  static Decoder byte_level() { return Decoder{DecoderKind::ByteLevel, {}}; }

  DecoderKind kind = DecoderKind::JoinWithSpaces;
  std::vector<DecodeStep> steps;  // for DecoderKind::Chain
};

// Runs a decoder chain over tokens pushed one at a time. The text appended by all push() calls
// and finish() together is exactly what Hugging Face's decoder returns for the whole sequence;
// text is held back only as long as a later token can still change it (a byte-fallback run
// until the next other token; after a Fuse, the trailing characters a Strip may remove).
// Every piece of appended text is valid UTF-8 when the tokens are.
class ChainDecodeStream {
 public:
  // `steps` must outlive the stream.
  explicit ChainDecodeStream(const std::vector<DecodeStep>& steps);

  void push(std::string_view token, std::string& out);
  void finish(std::string& out);

 private:
  struct StepState {
    std::string fallback_bytes;  // ByteFallback: the pending run of byte values
    size_t fallback_count = 0;   // ByteFallback: the number of byte tokens in that run
    size_t tokens_seen = 0;      // Fuse, Metaspace: tokens that have started at this step
    size_t leading_left = 0;     // Strip after Fuse: leading characters that may still be removed
    std::string held;            // Strip after Fuse: trailing `content` characters held back
    size_t held_count = 0;
  };

  // Hands `text` to step `step` (the output when past the last step); `starts_token` tells
  // whether it begins a new token or continues the current one.
  void feed(size_t step, std::string text, bool starts_token, std::string& out);
  void flush(size_t step, std::string& out);

  const std::vector<DecodeStep>* steps_;
  std::vector<StepState> states_;
  // Whether a Fuse comes before each step: only then can it receive a token in several pieces.
  std::vector<bool> fused_before_;
};

}  // namespace mb::tok

// SPDX-License-Identifier: MIT
// BPE tokenizer with the semantics of Hugging Face `tokenizers`.
//
// Loads tokenizer.json files, byte-level (GPT-NeoX-20B, GPT-2, Llama-3, Qwen2/3 style) or
// SentencePiece-style (Llama-2, Mistral: "▁" word markers, byte fallback to <0xNN> tokens), or
// a GPT-2 style vocab.json + merges.txt pair, and reproduces HF's encode() ids and decode() text
// exactly: added tokens are split out first (non-normalized ones on the raw text, normalized
// ones after the normalizer), then the normalizer, the pre-tokenizer and the BPE merges run.
//
// encode() never adds BOS/EOS or other template tokens: the post-processor is ignored, which is
// what GPT-NeoX (the Mamba tokenizer) does anyway. A Tokenizer is immutable after loading,
// cheap to copy (copies share the loaded tables) and safe to use from several threads.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace mb {

namespace tok {
class ChainDecodeStream;
}

class Tokenizer {
 public:
  // Every loader throws mb::Error naming the file and the problem when a file is missing,
  // malformed or uses a component this implementation does not support.
  static Tokenizer from_json_file(const std::string& path);
  // `source` names the text in error messages.
  static Tokenizer from_json_string(std::string_view json_text, const std::string& source = "tokenizer.json");
  // GPT-2's pipeline (ByteLevel pre-tokenizer and decoder, no normalizer). "<|endoftext|>", when
  // the vocabulary has it, is registered as a special token.
  static Tokenizer from_vocab_merges(const std::string& vocab_json_path, const std::string& merges_txt_path);
  // Uses dir/tokenizer.json, else dir/vocab.json + dir/merges.txt.
  static Tokenizer from_model_dir(const std::string& dir);

  // Text that is not valid UTF-8 is first converted the way Rust's String::from_utf8_lossy does
  // (each maximal ill-formed subsequence becomes U+FFFD), since HF only accepts valid strings.
  std::vector<int32_t> encode(std::string_view text) const;

  // Runs the tokens through the file's decoder like HF: for byte-level files, concatenates the
  // tokens' bytes and converts them lossily to UTF-8; for SentencePiece-style ones, turns
  // markers into spaces and byte-fallback runs into text. With `skip_special`, special added
  // tokens are left out first. Throws mb::Error for an id that has no token (HF silently drops
  // such ids).
  std::string decode(std::span<const int32_t> ids, bool skip_special = false) const;

  // One past the highest id, added tokens included.
  int32_t vocab_size() const;
  std::optional<int32_t> token_to_id(std::string_view token) const;
  // The token's string as stored in the vocabulary (byte-level form for BPE entries).
  std::optional<std::string> id_to_token(int32_t id) const;
  // Special added tokens whose content names an end of text or of a turn (<|endoftext|>, </s>,
  // <|end_of_text|>, <|im_end|>, <|eot_id|>, ...), in increasing id order. Best effort.
  std::vector<int32_t> eos_token_ids() const;
  bool is_special(int32_t id) const;
  // The bytes the decoder emits for `id` in the middle of a text (no UTF-8 repair: a byte-level
  // token that ends inside a character gives its raw bytes), for constrained decoding, which
  // matches a grammar against them; nullopt for an id without a token. Byte-level files give the
  // exact bytes. For decoder chains it applies each token-local step (Replace, ByteFallback's
  // <0xNN> byte, Metaspace's space) and skips the ones that look at neighbours (Strip of the
  // text's first space, Fuse): the mid-text form. Without a decoder it is the token's string.
  std::optional<std::string> token_bytes(int32_t id) const;

  struct Impl;

 private:
  explicit Tokenizer(std::shared_ptr<const Impl> impl) : impl_(std::move(impl)) {}
  std::shared_ptr<const Impl> impl_;
  friend class StreamDecoder;
};

// Incremental decoding for generation: feed ids one at a time and get back only complete UTF-8
// text. The bytes of a multi-byte character split across tokens are held back until the
// character is complete; bytes that can never complete one become U+FFFD at once, and finish()
// flushes a held incomplete tail as U+FFFD. With byte fallback (<0xNN> tokens), a run of byte
// tokens is held until the next other token, because HF turns the whole run into U+FFFDs when
// any part of it is not valid UTF-8. The concatenation of all push() results and finish()
// equals decode() of the same ids.
class StreamDecoder {
 public:
  explicit StreamDecoder(const Tokenizer& tokenizer, bool skip_special = false);
  StreamDecoder(const StreamDecoder& other);
  StreamDecoder& operator=(const StreamDecoder& other);
  StreamDecoder(StreamDecoder&&) noexcept;
  StreamDecoder& operator=(StreamDecoder&&) noexcept;
  ~StreamDecoder();

  std::string push(int32_t id);
  std::string finish();

 private:
  Tokenizer tokenizer_;
  bool skip_special_;
  bool emitted_token_ = false;
  std::string pending_;
  // The state of a decoder chain (SentencePiece-style files); null for the other decoders.
  std::unique_ptr<tok::ChainDecodeStream> chain_;
};

// Writes a small byte-level BPE tokenizer.json: <|endoftext|> (special) at id 0, the 256 byte
// tokens at ids 1..256, then up to a few hundred merges learned from a built-in English text,
// stopping at `max_vocab` entries in total. It lets a randomly initialised model run end to end
// with text. Throws mb::Error if `max_vocab` is below 257 or the file cannot be written.
void write_byte_level_tokenizer_json(const std::string& path, int32_t max_vocab);

}  // namespace mb

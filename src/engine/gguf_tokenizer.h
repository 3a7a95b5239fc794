// SPDX-License-Identifier: MIT
// Tokenizers in GGUF metadata (tokenizer.ggml.*), as llama.cpp's convert_hf_to_gguf.py writes
// them for byte-level BPE ("gpt2") tokenizers, converted to and from tokenizer.json.
//
// The metadata: tokenizer.ggml.model "gpt2"; tokenizer.ggml.pre, the pre-tokenizer's name;
// tokenizer.ggml.tokens, one string per id (vocabulary entries in their byte-level form, added
// tokens as their raw content, "[PAD<id>]" for ids nothing uses); tokenizer.ggml.token_type
// (1 normal, 3 control = special added token, 4 user-defined = other added token, 5 unused);
// tokenizer.ggml.merges ("a b" strings, by rank); the special ids (eos_token_id, ...) and
// add_bos_token.
//
// Reading builds the tokenizer.json that Hugging Face's files of the same tokenizer hold, so
// Tokenizer::from_json_string loads it with every check it applies to files. What GGUF does not
// record is taken from Hugging Face's defaults for these tokenizers: control tokens match the
// raw text (normalized: false), user-defined ones the normalized text (normalized: true), and the
// pre-tokenizer names map to pipelines as follows (BPE's ignore_merges as llama.cpp sets it for
// the name):
//   "gpt-2"                 no normalizer, ByteLevel with GPT-2's regex (GPT-2)
//   "olmo", "mpt"           NFC, then the same ByteLevel (the GPT-NeoX-20B tokenizer of Mamba,
//                           Pythia, OLMo and MPT; llama.cpp's converter names it after OLMo)
//   "llama-bpe", "llama3",  no normalizer, Split on Llama-3's regex (Isolated), ByteLevel without
//   "llama-v3"              a regex; ignore_merges
//   "dbrx", "smaug-bpe"     the same without ignore_merges (Granite-4.0's files say "dbrx")
//   "tekken"                Split on Mistral's Tekken regex, ByteLevel; ignore_merges (the
//                           131072-token tokenizer of Mistral NeMo; Nemotron-H's looks the same)
//   "qwen2"                 NFC, Split on Qwen2's regex (Llama-3's with single digits),
//                           ByteLevel (Qwen2, Qwen2.5, Qwen3, Qwen3-Next)
//   "qwen35"                NFC, Split on Qwen3.5's regex (Qwen2's with \p{M} beside \p{L}),
//                           ByteLevel (Qwen3.5 and Qwen3.6)
// llama.cpp itself applies no NFC step for "olmo", "mpt", "qwen2" and "qwen35"; Hugging Face's
// tokenizer.json for these models does, and it is the reference the engine follows. Writing
// picks the first name of the table whose pipeline a tokenizer.json has. SentencePiece ("llama") and other
// tokenizer models and pre-tokenizers are refused with a message. tokenizer.ggml.add_bos_token is written
// false and not read: the engine adds no BOS token for a folder's tokenizer.json either.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "io/gguf.h"
#include "tokenizer/tokenizer.h"

namespace mb {

// The tokenizer.json text of the file's tokenizer; throws mb::Error naming the file when it has
// none or an unsupported or malformed one.
std::string gguf_tokenizer_json(const GgufFile& file);
Tokenizer gguf_tokenizer(const GgufFile& file);

// The tokenizer.ggml.* metadata of a tokenizer.json, with `vocab_rows` token entries (the model's
// embedding rows; ids the tokenizer does not use become unused "[PAD<id>]" entries). Throws
// mb::Error (naming `source`) for a tokenizer GGUF cannot describe or one with more ids than rows.
std::vector<std::pair<std::string, GgufValue>> gguf_tokenizer_metadata(std::string_view tokenizer_json,
                                                                       int64_t vocab_rows,
                                                                       std::optional<int32_t> eos_token_id,
                                                                       const std::string& source);

// The tokenizer of a checkpoint: a GGUF file's metadata, or a folder's tokenizer.json (or
// vocab.json + merges.txt).
Tokenizer load_tokenizer(const std::string& model_path);
// The same, or nothing when the checkpoint has none (a folder without tokenizer.json or
// vocab.json + merges.txt, a GGUF file without tokenizer.ggml.model); one that is there but
// cannot be read throws mb::Error.
std::optional<Tokenizer> find_tokenizer(const std::string& model_path);

}  // namespace mb

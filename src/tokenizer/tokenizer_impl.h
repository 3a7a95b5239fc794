// SPDX-License-Identifier: MIT
// The loaded state behind mb::Tokenizer, shared by the loaders and the encode/decode code.
#pragma once

#include <string>
#include <vector>

#include "tokenizer/added_vocabulary.h"
#include "tokenizer/bpe.h"
#include "tokenizer/decoder.h"
#include "tokenizer/pipeline.h"
#include "tokenizer/tokenizer.h"

namespace mb {

struct Tokenizer::Impl {
  Impl(std::string source_name, tok::BpeModel bpe_model, tok::Normalizer normalizer_stage,
       tok::PreTokenizer pre_tokenizer_stage, tok::Decoder decoder_stage)
      : source(std::move(source_name)),
        model(std::move(bpe_model)),
        normalizer(std::move(normalizer_stage)),
        pre_tokenizer(std::move(pre_tokenizer_stage)),
        decoder(std::move(decoder_stage)) {}

  // Builds the added-token matchers and the per-id tables once every added token is known.
  void finalize();
  // Throws mb::Error unless `id` has a token.
  void check_id(int32_t id) const;

  std::string source;
  tok::BpeModel model;
  tok::Normalizer normalizer;
  tok::PreTokenizer pre_tokenizer;
  tok::Decoder decoder;
  tok::AddedVocabulary added;

  int32_t vocab_size = 0;
  // Per id: whether a token exists, whether it is special, and the bytes the decoder turns it
  // into (for ByteLevel, the token's characters mapped back to bytes; otherwise the token's
  // string, which a decoder chain then processes).
  std::vector<uint8_t> has_token;
  std::vector<uint8_t> special;
  std::vector<std::string> decoded_pieces;
};

}  // namespace mb

// SPDX-License-Identifier: MIT
#include "tokenizer/tokenizer.h"

#include <algorithm>
#include <array>

#include "core/error.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/decoder.h"
#include "tokenizer/tokenizer_impl.h"
#include "tokenizer/utf8.h"

namespace mb {

namespace {

// Contents that mark the end of a document or of a chat turn across the common model families.
constexpr std::array<std::string_view, 9> kEndTokenContents = {
    "<|endoftext|>", "</s>",    "<|end_of_text|>", "<|im_end|>", "<|eot_id|>",
    "<|eom_id|>",    "<|end|>", "<eos>",           "<|return|>"};

}  // namespace

void Tokenizer::Impl::finalize() {
  added.build(model, [this](std::string_view content) { return normalizer.apply(content); });

  vocab_size = model.id_bound();
  for (const auto& [id, token] : added.tokens_by_id()) vocab_size = std::max(vocab_size, id + 1);
  has_token.assign(vocab_size, 0);
  special.assign(vocab_size, 0);
  decoded_pieces.assign(vocab_size, std::string());
  for (int32_t id = 0; id < vocab_size; ++id) {
    // Added tokens shadow model entries with the same id, as in HF's id_to_token.
    const std::string* content = nullptr;
    if (const tok::AddedToken* token = added.token_for_id(id)) {
      content = &token->content;
    } else {
      content = model.id_to_token(id);
    }
    if (content == nullptr) continue;
    has_token[id] = 1;
    special[id] = added.is_special_content(*content) ? 1 : 0;
    if (decoder.kind == tok::DecoderKind::ByteLevel) {
      tok::append_byte_level_decoded(decoded_pieces[id], *content);
    } else {
      decoded_pieces[id] = *content;
    }
  }
}

void Tokenizer::Impl::check_id(int32_t id) const {
  if (id < 0 || id >= vocab_size) {
    throw Error("token id " + std::to_string(id) + " is out of range for tokenizer '" + source +
                "' (vocabulary size " + std::to_string(vocab_size) + ")");
  }
  if (!has_token[id])
    throw Error("token id " + std::to_string(id) + " has no token in tokenizer '" + source + "'");
}

std::vector<int32_t> Tokenizer::encode(std::string_view text) const {
  const Impl& m = *impl_;
  std::string repaired;
  if (!tok::is_valid_utf8(text)) {
    repaired = tok::to_valid_utf8(text);
    text = repaired;
  }
  std::vector<int32_t> ids;
  std::vector<tok::Segment> raw_segments;
  std::vector<tok::Segment> normalized_segments;
  std::vector<std::string> words;
  // One backtracking budget for the Split regexes over the whole text, so that neither many
  // pieces nor many added tokens multiply its constant.
  tok::RegexBudget regex_budget;
  m.added.split(text, false, raw_segments);
  for (const tok::Segment& raw : raw_segments) {
    if (raw.id >= 0) {
      ids.push_back(raw.id);
      continue;
    }
    const std::string normalized = m.normalizer.apply(text.substr(raw.begin, raw.end - raw.begin));
    normalized_segments.clear();
    m.added.split(normalized, true, normalized_segments);
    for (const tok::Segment& piece : normalized_segments) {
      if (piece.id >= 0) {
        ids.push_back(piece.id);
        continue;
      }
      words.clear();
      // Hugging Face asks whether the piece's original offset is 0. Offset 0 of the normalized
      // text maps back to offset 0 of the input for every supported normalizer except a Replace
      // with empty content that deletes the first characters, which no known file has.
      const bool at_input_start = raw.begin == 0 && piece.begin == 0;
      m.pre_tokenizer.apply(std::string_view(normalized).substr(piece.begin, piece.end - piece.begin), words,
                            at_input_start, &regex_budget);
      for (const std::string& word : words) m.model.tokenize(word, ids);
    }
  }
  return ids;
}

std::string Tokenizer::decode(std::span<const int32_t> ids, bool skip_special) const {
  const Impl& m = *impl_;
  std::string bytes;
  if (m.decoder.kind == tok::DecoderKind::Chain) {
    tok::ChainDecodeStream chain(m.decoder.steps);
    for (int32_t id : ids) {
      m.check_id(id);
      if (!(skip_special && m.special[id])) chain.push(m.decoded_pieces[id], bytes);
    }
    chain.finish(bytes);
    return tok::to_valid_utf8(bytes);
  }
  bool first = true;
  for (int32_t id : ids) {
    m.check_id(id);
    if (skip_special && m.special[id]) continue;
    if (m.decoder.kind == tok::DecoderKind::JoinWithSpaces && !first) bytes.push_back(' ');
    bytes += m.decoded_pieces[id];
    first = false;
  }
  return tok::to_valid_utf8(bytes);
}

std::optional<std::string> Tokenizer::token_bytes(int32_t id) const {
  const Impl& m = *impl_;
  if (id < 0 || id >= m.vocab_size || !m.has_token[id]) return std::nullopt;
  std::string piece = m.decoded_pieces[id];
  if (m.decoder.kind != tok::DecoderKind::Chain) return piece;
  const auto replace_all = [&](std::string_view from, std::string_view to) {
    if (from.empty()) return;
    std::string out;
    for (size_t i = 0; i < piece.size();) {
      if (piece.compare(i, from.size(), from) == 0) {
        out += to;
        i += from.size();
      } else {
        out.push_back(piece[i++]);
      }
    }
    piece = std::move(out);
  };
  for (const tok::DecodeStep& step : m.decoder.steps) {
    if (const auto* replace = std::get_if<tok::ReplaceDecodeStep>(&step)) {
      replace_all(replace->pattern, replace->content);
    } else if (std::holds_alternative<tok::ByteFallbackDecodeStep>(step)) {
      int value = -1;
      if (piece.size() == 6 && piece.starts_with("<0x") && piece[5] == '>') {
        const auto hex = [](char c) {
          return c >= '0' && c <= '9' ? c - '0' : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
        };
        if (hex(piece[3]) >= 0 && hex(piece[4]) >= 0) value = hex(piece[3]) * 16 + hex(piece[4]);
      }
      if (value >= 0) piece = std::string(1, static_cast<char>(value));
    } else if (const auto* metaspace = std::get_if<tok::MetaspaceDecodeStep>(&step)) {
      std::string marker;
      tok::append_utf8(marker, metaspace->replacement);
      replace_all(marker, " ");
    }
  }
  return piece;
}

int32_t Tokenizer::vocab_size() const {
  return impl_->vocab_size;
}

std::optional<int32_t> Tokenizer::token_to_id(std::string_view token) const {
  if (const auto id = impl_->added.token_to_id(token)) return id;
  return impl_->model.token_to_id(token);
}

std::optional<std::string> Tokenizer::id_to_token(int32_t id) const {
  if (const tok::AddedToken* token = impl_->added.token_for_id(id)) return token->content;
  if (const std::string* token = impl_->model.id_to_token(id)) return *token;
  return std::nullopt;
}

std::vector<int32_t> Tokenizer::eos_token_ids() const {
  std::vector<int32_t> ids;
  for (const auto& [id, token] : impl_->added.tokens_by_id()) {
    if (!is_special(id)) continue;
    if (std::find(kEndTokenContents.begin(), kEndTokenContents.end(), token.content) !=
        kEndTokenContents.end()) {
      ids.push_back(id);
    }
  }
  std::sort(ids.begin(), ids.end());
  return ids;
}

bool Tokenizer::is_special(int32_t id) const {
  return id >= 0 && id < impl_->vocab_size && impl_->special[id] != 0;
}

StreamDecoder::StreamDecoder(const Tokenizer& tokenizer, bool skip_special)
    : tokenizer_(tokenizer), skip_special_(skip_special) {
  const tok::Decoder& decoder = tokenizer_.impl_->decoder;
  if (decoder.kind == tok::DecoderKind::Chain)
    chain_ = std::make_unique<tok::ChainDecodeStream>(decoder.steps);
}

StreamDecoder::StreamDecoder(const StreamDecoder& other)
    : tokenizer_(other.tokenizer_),
      skip_special_(other.skip_special_),
      emitted_token_(other.emitted_token_),
      pending_(other.pending_),
      chain_(other.chain_ ? std::make_unique<tok::ChainDecodeStream>(*other.chain_) : nullptr) {}

StreamDecoder& StreamDecoder::operator=(const StreamDecoder& other) {
  if (this != &other) *this = StreamDecoder(other);
  return *this;
}

StreamDecoder::StreamDecoder(StreamDecoder&&) noexcept = default;
StreamDecoder& StreamDecoder::operator=(StreamDecoder&&) noexcept = default;
StreamDecoder::~StreamDecoder() = default;

std::string StreamDecoder::push(int32_t id) {
  const Tokenizer::Impl& m = *tokenizer_.impl_;
  m.check_id(id);
  if (skip_special_ && m.special[id]) return std::string();
  if (chain_) {
    // The chain only ever appends valid UTF-8, which the lossy pass below passes on unchanged.
    chain_->push(m.decoded_pieces[id], pending_);
  } else {
    if (m.decoder.kind == tok::DecoderKind::JoinWithSpaces && emitted_token_) pending_.push_back(' ');
    pending_ += m.decoded_pieces[id];
  }
  emitted_token_ = true;
  std::string text;
  const size_t consumed = tok::append_lossy_utf8(text, pending_, false);
  pending_.erase(0, consumed);
  return text;
}

std::string StreamDecoder::finish() {
  if (chain_) chain_->finish(pending_);
  std::string text;
  tok::append_lossy_utf8(text, pending_, true);
  pending_.clear();
  return text;
}

}  // namespace mb

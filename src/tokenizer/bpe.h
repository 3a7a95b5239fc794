// SPDX-License-Identifier: MIT
// The BPE model of Hugging Face tokenizers: a vocabulary, ranked merges, and the merge loop
// that turns one pre-tokenized word into ids.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace mb::tok {

struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const noexcept { return std::hash<std::string_view>{}(s); }
};

using StringIdMap = std::unordered_map<std::string, int32_t, StringHash, std::equal_to<>>;

struct BpeOptions {
  // Look the whole word up in the vocabulary before merging (Llama-3 sets this).
  bool ignore_merges = false;
  std::optional<std::string> unk_token;
  bool fuse_unk = false;
  // Spell a character missing from the vocabulary as its UTF-8 bytes, the tokens <0x00>..<0xFF>
  // (SentencePiece's byte fallback), when the vocabulary has all of them.
  bool byte_fallback = false;
};

class BpeModel {
 public:
  // `merges` are in rank order. `source` names the file(s) for error messages. Throws
  // mb::Error when a merge names a token, or produces a token, missing from the vocabulary.
  BpeModel(std::vector<std::pair<std::string, int32_t>> vocab,
           const std::vector<std::pair<std::string, std::string>>& merges, BpeOptions options,
           const std::string& source);

  // Appends the ids of one word; characters missing from the vocabulary become byte tokens with
  // byte_fallback, else the unknown token when there is one, else nothing, as in Hugging Face.
  void tokenize(std::string_view word, std::vector<int32_t>& ids) const;

  std::optional<int32_t> token_to_id(std::string_view token) const;
  // Null when the id has no entry.
  const std::string* id_to_token(int32_t id) const;
  // The number of entries, which is what Hugging Face uses to number new added tokens.
  int32_t entry_count() const { return static_cast<int32_t>(vocab_.size()); }
  // One past the highest id in the vocabulary.
  int32_t id_bound() const { return static_cast<int32_t>(tokens_.size()); }

 private:
  struct MergeTarget {
    int32_t rank;
    int32_t new_id;
  };
  static uint64_t pair_key(int32_t left, int32_t right) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) | static_cast<uint32_t>(right);
  }
  void merge_word(std::string_view word, std::vector<int32_t>& ids) const;

  StringIdMap vocab_;
  std::vector<std::string> tokens_;
  std::vector<uint8_t> has_token_;
  std::unordered_map<uint64_t, MergeTarget> merges_;
  BpeOptions options_;
  std::optional<int32_t> unk_id_;
  // The ids of <0x00>..<0xFF>, -1 where the vocabulary lacks one.
  std::array<int32_t, 256> byte_token_ids_{};
};

}  // namespace mb::tok

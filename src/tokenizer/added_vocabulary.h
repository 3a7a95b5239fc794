// SPDX-License-Identifier: MIT
// Added tokens (special tokens such as <|endoftext|> and extra entries such as GPT-NeoX's runs
// of spaces) and the leftmost-longest matcher that splits them out of the text before the
// normalizer and pre-tokenizer run.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "tokenizer/bpe.h"

namespace mb::tok {

struct AddedToken {
  std::string content;
  bool single_word = false;
  bool lstrip = false;
  bool rstrip = false;
  bool normalized = true;
  bool special = false;

  bool operator==(const AddedToken&) const = default;
};

// A byte trie over the token contents; a match is the longest token starting at the leftmost
// position where any token starts, like aho-corasick's LeftmostLongest mode.
class TokenTrie {
 public:
  void insert(std::string_view pattern, int32_t id);
  bool empty() const { return nodes_.size() <= 1; }
  // Finds the next match at or after `from`; returns false when there is none.
  bool find(std::string_view text, size_t from, size_t& start, size_t& end, int32_t& id) const;

 private:
  struct Node {
    std::vector<std::pair<unsigned char, int32_t>> children;
    int32_t id = -1;
  };
  int32_t child(int32_t node, unsigned char byte) const;
  std::vector<Node> nodes_ = std::vector<Node>(1);
  bool first_bytes_[256] = {};
};

// One piece of a split: plain text to process further, or an added token's id.
struct Segment {
  size_t begin;
  size_t end;
  int32_t id;  // -1 for plain text
};

class AddedVocabulary {
 public:
  // Registers tokens in file order and numbers them as Hugging Face does: a token already in
  // the vocabulary keeps that id, a new one gets the next id after the model's vocabulary and
  // the added tokens so far.
  void add(const AddedToken& token, const BpeModel& model);
  // Builds the two matchers; contents of normalized tokens are matched in their normalized
  // form, which `normalize` produces.
  template <typename NormalizeFn>
  void build(const BpeModel& model, NormalizeFn normalize);

  // Splits `text` with the matcher for non-normalized (`normalized_set` false) or normalized
  // tokens. Empty plain-text segments are left out.
  void split(std::string_view text, bool normalized_set, std::vector<Segment>& segments) const;

  std::optional<int32_t> token_to_id(std::string_view content) const;
  const AddedToken* token_for_id(int32_t id) const;
  bool is_special_content(std::string_view content) const;
  const std::unordered_map<int32_t, AddedToken>& tokens_by_id() const { return by_id_; }

 private:
  std::optional<int32_t> lookup(std::string_view content, const BpeModel& model) const;

  StringIdMap ids_by_content_;
  std::optional<int32_t> max_added_id_;
  std::unordered_map<int32_t, AddedToken> by_id_;
  std::vector<AddedToken> special_tokens_;
  std::vector<AddedToken> plain_tokens_;
  std::unordered_set<std::string, StringHash, std::equal_to<>> special_contents_;
  TokenTrie raw_trie_;
  TokenTrie normalized_trie_;
};

template <typename NormalizeFn>
void AddedVocabulary::build(const BpeModel& model, NormalizeFn normalize) {
  raw_trie_ = TokenTrie();
  normalized_trie_ = TokenTrie();
  const auto insert = [&](const AddedToken& token) {
    const int32_t id = *lookup(token.content, model);
    if (token.normalized) {
      normalized_trie_.insert(normalize(token.content), id);
    } else {
      raw_trie_.insert(token.content, id);
    }
  };
  for (const AddedToken& token : special_tokens_) insert(token);
  for (const AddedToken& token : plain_tokens_) insert(token);
}

}  // namespace mb::tok

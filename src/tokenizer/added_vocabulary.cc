// SPDX-License-Identifier: MIT
#include "tokenizer/added_vocabulary.h"

#include <algorithm>

#include "tokenizer/unicode.h"
#include "tokenizer/utf8.h"

namespace mb::tok {

namespace {

char32_t first_char(std::string_view text) {
  size_t pos = 0;
  return next_code_point(text, pos);
}

char32_t last_char(std::string_view text) {
  size_t pos = text.size() - 1;
  while (pos > 0 && (static_cast<unsigned char>(text[pos]) & 0xC0) == 0x80) --pos;
  return next_code_point(text, pos);
}

// Byte length of the white space at the end of `text`.
size_t trailing_space_length(std::string_view text) {
  size_t end = text.size();
  while (end > 0) {
    size_t start = end - 1;
    while (start > 0 && (static_cast<unsigned char>(text[start]) & 0xC0) == 0x80) --start;
    size_t pos = start;
    if (!is_white_space(next_code_point(text, pos))) break;
    end = start;
  }
  return text.size() - end;
}

// Byte length of the white space at the start of `text`.
size_t leading_space_length(std::string_view text) {
  size_t pos = 0;
  while (pos < text.size()) {
    size_t next = pos;
    if (!is_white_space(next_code_point(text, next))) break;
    pos = next;
  }
  return pos;
}

}  // namespace

void TokenTrie::insert(std::string_view pattern, int32_t id) {
  if (pattern.empty()) return;
  int32_t node = 0;
  for (char c : pattern) {
    const auto byte = static_cast<unsigned char>(c);
    int32_t next = child(node, byte);
    if (next < 0) {
      next = static_cast<int32_t>(nodes_.size());
      nodes_[node].children.emplace_back(byte, next);
      nodes_.emplace_back();
    }
    node = next;
  }
  // With two identical patterns the first one registered wins.
  if (nodes_[node].id < 0) nodes_[node].id = id;
  first_bytes_[static_cast<unsigned char>(pattern[0])] = true;
}

int32_t TokenTrie::child(int32_t node, unsigned char byte) const {
  for (const auto& [b, next] : nodes_[node].children) {
    if (b == byte) return next;
  }
  return -1;
}

bool TokenTrie::find(std::string_view text, size_t from, size_t& start, size_t& end, int32_t& id) const {
  if (empty()) return false;
  for (size_t pos = from; pos < text.size(); ++pos) {
    if (!first_bytes_[static_cast<unsigned char>(text[pos])]) continue;
    int32_t node = 0;
    int32_t best_id = -1;
    size_t best_end = 0;
    for (size_t k = pos; k < text.size(); ++k) {
      node = child(node, static_cast<unsigned char>(text[k]));
      if (node < 0) break;
      if (nodes_[node].id >= 0) {
        best_id = nodes_[node].id;
        best_end = k + 1;
      }
    }
    if (best_id >= 0) {
      start = pos;
      end = best_end;
      id = best_id;
      return true;
    }
  }
  return false;
}

std::optional<int32_t> AddedVocabulary::lookup(std::string_view content, const BpeModel& model) const {
  if (const auto id = token_to_id(content)) return id;
  return model.token_to_id(content);
}

void AddedVocabulary::add(const AddedToken& token, const BpeModel& model) {
  if (token.special && !token.content.empty() && !special_contents_.contains(token.content)) {
    special_tokens_.push_back(token);
    special_contents_.insert(token.content);
  }
  if (token.content.empty()) return;
  // An identical token registered before is ignored. Only the entry holding the same content
  // can be identical, because a content never moves to another id.
  if (const auto existing_id = token_to_id(token.content)) {
    const AddedToken* existing = token_for_id(*existing_id);
    if (existing != nullptr && *existing == token) return;
  }
  int32_t id;
  if (const auto known = lookup(token.content, model)) {
    id = *known;
  } else if (!max_added_id_) {
    id = model.entry_count();
  } else {
    const int32_t max_added = *max_added_id_;
    id = (max_added >= model.entry_count() || model.entry_count() == 0) ? max_added + 1 : model.entry_count();
  }
  max_added_id_ = std::max(max_added_id_.value_or(id), id);
  ids_by_content_.insert_or_assign(token.content, id);
  by_id_.insert_or_assign(id, token);
  if (!special_contents_.contains(token.content)) plain_tokens_.push_back(token);
}

std::optional<int32_t> AddedVocabulary::token_to_id(std::string_view content) const {
  const auto it = ids_by_content_.find(content);
  if (it == ids_by_content_.end()) return std::nullopt;
  return it->second;
}

const AddedToken* AddedVocabulary::token_for_id(int32_t id) const {
  const auto it = by_id_.find(id);
  return it == by_id_.end() ? nullptr : &it->second;
}

bool AddedVocabulary::is_special_content(std::string_view content) const {
  return special_contents_.find(content) != special_contents_.end();
}

void AddedVocabulary::split(std::string_view text, bool normalized_set,
                            std::vector<Segment>& segments) const {
  const TokenTrie& trie = normalized_set ? normalized_trie_ : raw_trie_;
  size_t covered = 0;
  size_t search_from = 0;
  size_t match_start = 0;
  size_t match_end = 0;
  int32_t id = -1;
  // The scan resumes after each raw match even when lstrip/rstrip or single_word change what
  // is kept, exactly like the aho-corasick iterator Hugging Face drives.
  while (trie.find(text, search_from, match_start, match_end, id)) {
    search_from = match_end;
    const AddedToken& token = by_id_.at(id);
    size_t start = match_start;
    size_t stop = match_end;
    if (token.single_word) {
      const bool word_before = start > 0 && is_word_char(last_char(text.substr(0, start)));
      const bool word_after = stop < text.size() && is_word_char(first_char(text.substr(stop)));
      if (word_before || word_after) continue;
    }
    if (token.lstrip) start = std::max(start - trailing_space_length(text.substr(0, start)), covered);
    if (token.rstrip) stop += leading_space_length(text.substr(stop));
    if (covered < start) segments.push_back(Segment{covered, start, -1});
    segments.push_back(Segment{start, stop, id});
    covered = stop;
  }
  if (covered < text.size()) segments.push_back(Segment{covered, text.size(), -1});
}

}  // namespace mb::tok

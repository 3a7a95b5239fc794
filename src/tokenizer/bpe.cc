// SPDX-License-Identifier: MIT
#include "tokenizer/bpe.h"

#include <queue>

#include "core/error.h"
#include "tokenizer/utf8.h"

namespace mb::tok {

namespace {

// Ids are dense in every real vocabulary; the bound keeps a corrupt file from asking for a
// multi-gigabyte id table.
constexpr int32_t kMaxTokenId = (1 << 24) - 1;

size_t utf8_char_length(unsigned char lead) {
  if (lead < 0x80) return 1;
  if (lead < 0xE0) return 2;
  if (lead < 0xF0) return 3;
  return 4;
}

struct Symbol {
  int32_t id;
  int32_t prev;
  int32_t next;
  bool removed;
};

struct PendingMerge {
  int32_t rank;
  int32_t pos;
  int32_t new_id;
  // The queue pops the lowest rank first and, among equal ranks, the leftmost position.
  bool operator<(const PendingMerge& other) const {
    if (rank != other.rank) return rank > other.rank;
    return pos > other.pos;
  }
};

}  // namespace

BpeModel::BpeModel(std::vector<std::pair<std::string, int32_t>> vocab,
                   const std::vector<std::pair<std::string, std::string>>& merges, BpeOptions options,
                   const std::string& source)
    : options_(std::move(options)) {
  int32_t max_id = -1;
  for (const auto& [token, id] : vocab) {
    if (id < 0 || id > kMaxTokenId) {
      throw Error(source + ": token '" + token + "' has id " + std::to_string(id) + ", outside [0, " +
                  std::to_string(kMaxTokenId) + "]");
    }
    max_id = std::max(max_id, id);
  }
  tokens_.resize(static_cast<size_t>(max_id + 1));
  has_token_.assign(static_cast<size_t>(max_id + 1), 0);
  vocab_.reserve(vocab.size());
  for (auto& [token, id] : vocab) {
    tokens_[id] = token;
    has_token_[id] = 1;
    vocab_.insert_or_assign(std::move(token), id);
  }

  merges_.reserve(merges.size());
  for (size_t rank = 0; rank < merges.size(); ++rank) {
    const auto& [left, right] = merges[rank];
    // Structured bindings are captured explicitly: clang accepts them in a capture-default only from
    // version 16.
    const auto describe = [&source, rank, &left = left, &right = right] {
      return source + ": merge #" + std::to_string(rank) + " ('" + left + "' + '" + right + "')";
    };
    const auto left_id = token_to_id(left);
    if (!left_id) throw Error(describe() + " references token '" + left + "' that is not in the vocabulary");
    const auto right_id = token_to_id(right);
    if (!right_id)
      throw Error(describe() + " references token '" + right + "' that is not in the vocabulary");
    const auto new_id = token_to_id(left + right);
    if (!new_id) throw Error(describe() + " produces '" + left + right + "', which is not in the vocabulary");
    // A repeated pair keeps its last rank, as a hash map built from the list would.
    merges_.insert_or_assign(pair_key(*left_id, *right_id), MergeTarget{static_cast<int32_t>(rank), *new_id});
  }

  byte_token_ids_.fill(-1);
  if (options_.byte_fallback) {
    static constexpr char kHex[] = "0123456789ABCDEF";
    for (int byte = 0; byte < 256; ++byte) {
      const std::string name = std::string("<0x") + kHex[byte >> 4] + kHex[byte & 15] + ">";
      byte_token_ids_[byte] = token_to_id(name).value_or(-1);
    }
  }

  if (options_.unk_token) {
    unk_id_ = token_to_id(*options_.unk_token);
    if (!unk_id_) throw Error(source + ": unk_token '" + *options_.unk_token + "' is not in the vocabulary");
  }
}

std::optional<int32_t> BpeModel::token_to_id(std::string_view token) const {
  const auto it = vocab_.find(token);
  if (it == vocab_.end()) return std::nullopt;
  return it->second;
}

const std::string* BpeModel::id_to_token(int32_t id) const {
  if (id < 0 || id >= id_bound() || !has_token_[id]) return nullptr;
  return &tokens_[id];
}

void BpeModel::tokenize(std::string_view word, std::vector<int32_t>& ids) const {
  if (word.empty()) return;
  if (options_.ignore_merges) {
    if (const auto id = token_to_id(word)) {
      ids.push_back(*id);
      return;
    }
  }
  merge_word(word, ids);
}

void BpeModel::merge_word(std::string_view word, std::vector<int32_t>& ids) const {
  std::vector<Symbol> symbols;
  symbols.reserve(word.size());
  const auto add_symbol = [&](int32_t id) {
    const auto index = static_cast<int32_t>(symbols.size());
    if (index > 0) symbols.back().next = index;
    symbols.push_back(Symbol{id, index - 1, -1, false});
  };

  // Characters missing from the vocabulary become their byte tokens with byte_fallback, else the
  // unknown token when there is one (runs fused into a single one with fuse_unk), and vanish
  // otherwise.
  const auto byte_tokens_exist = [&](std::string_view bytes) {
    for (char c : bytes) {
      if (byte_token_ids_[static_cast<unsigned char>(c)] < 0) return false;
    }
    return true;
  };
  bool pending_unk = false;
  for (size_t pos = 0; pos < word.size();) {
    const size_t length =
        std::min(utf8_char_length(static_cast<unsigned char>(word[pos])), word.size() - pos);
    const std::string_view character = word.substr(pos, length);
    const auto id = token_to_id(character);
    pos += length;
    if (id) {
      if (pending_unk) add_symbol(*unk_id_);
      pending_unk = false;
      add_symbol(*id);
    } else if (options_.byte_fallback && byte_tokens_exist(character)) {
      // Hugging Face leaves a pending unknown token pending here, so it lands after these
      // bytes and may still fuse with a later unknown character.
      for (char c : character) add_symbol(byte_token_ids_[static_cast<unsigned char>(c)]);
    } else if (unk_id_) {
      if (pending_unk && !options_.fuse_unk) add_symbol(*unk_id_);
      pending_unk = true;
    }
  }
  if (pending_unk) add_symbol(*unk_id_);

  const auto find_merge = [&](int32_t left, int32_t right) -> const MergeTarget* {
    const auto it = merges_.find(pair_key(left, right));
    return it == merges_.end() ? nullptr : &it->second;
  };

  std::priority_queue<PendingMerge> queue;
  for (size_t i = 0; i + 1 < symbols.size(); ++i) {
    if (const MergeTarget* m = find_merge(symbols[i].id, symbols[i + 1].id)) {
      queue.push(PendingMerge{m->rank, static_cast<int32_t>(i), m->new_id});
    }
  }
  while (!queue.empty()) {
    const PendingMerge top = queue.top();
    queue.pop();
    Symbol& current = symbols[top.pos];
    if (current.removed || current.next < 0) continue;
    const int32_t right_pos = current.next;
    const Symbol right = symbols[right_pos];
    // An entry is stale when either side has been merged since it was queued; the pair at this
    // position then no longer produces the queued token.
    const MergeTarget* m = find_merge(current.id, right.id);
    if (m == nullptr || m->new_id != top.new_id) continue;

    current.id = top.new_id;
    current.next = right.next;
    symbols[right_pos].removed = true;
    if (right.next >= 0) symbols[right.next].prev = top.pos;

    if (current.prev >= 0) {
      if (const MergeTarget* left = find_merge(symbols[current.prev].id, current.id)) {
        queue.push(PendingMerge{left->rank, current.prev, left->new_id});
      }
    }
    if (current.next >= 0) {
      if (const MergeTarget* next = find_merge(current.id, symbols[current.next].id)) {
        queue.push(PendingMerge{next->rank, top.pos, next->new_id});
      }
    }
  }
  for (const Symbol& symbol : symbols) {
    if (!symbol.removed) ids.push_back(symbol.id);
  }
}

}  // namespace mb::tok

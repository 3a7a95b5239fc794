// SPDX-License-Identifier: MIT
#include "engine/grammar/grammar_constraint.h"

#include <algorithm>
#include <array>
#include <limits>
#include <string>
#include <unordered_map>
#include <utility>

#include "core/error.h"

namespace mb {

TokenTrie::TokenTrie(const Tokenizer& tokenizer) : vocab_size_(tokenizer.vocab_size()) {
  bytes_.resize(static_cast<size_t>(vocab_size_));
  included_.assign(static_cast<size_t>(vocab_size_), 0);
  for (int32_t id = 0; id < vocab_size_; ++id) {
    if (tokenizer.is_special(id)) continue;
    std::optional<std::string> bytes = tokenizer.token_bytes(id);
    if (!bytes || bytes->empty()) continue;  // an empty token would let the text stand still for ever
    bytes_[id] = std::move(*bytes);
    included_[id] = 1;
    sorted_ids_.push_back(id);
  }
  std::ranges::stable_sort(sorted_ids_, [&](int32_t a, int32_t b) { return bytes_[a] < bytes_[b]; });

  // Built from the sorted strings in one pass: the path of the previous string is kept, cut back
  // to the common prefix with the next, and extended by its remaining bytes. Nodes are thus made
  // in preorder, and each node's children in byte order.
  std::vector<uint32_t> parent{0};
  std::vector<uint8_t> byte_in{0};
  nodes_.emplace_back();
  std::vector<uint32_t> path{0};  // path[d]: the node of the previous string's first d bytes
  const std::string* previous = nullptr;
  for (uint32_t i = 0; i < sorted_ids_.size(); ++i) {
    const std::string& s = bytes_[sorted_ids_[i]];
    size_t common = 0;
    if (previous != nullptr)
      while (common < s.size() && common < previous->size() && s[common] == (*previous)[common]) ++common;
    path.resize(common + 1);
    for (size_t d = common; d < s.size(); ++d) {
      const auto node = static_cast<uint32_t>(nodes_.size());
      nodes_.emplace_back();
      parent.push_back(path.back());
      byte_in.push_back(static_cast<uint8_t>(s[d]));
      path.push_back(node);
    }
    Node& end = nodes_[path.back()];
    if (end.token_count == 0) end.first_token = i;
    ++end.token_count;
    previous = &s;
  }
  // The edges, grouped by parent (a counting sort; children keep their creation order).
  for (size_t n = 1; n < nodes_.size(); ++n) ++nodes_[parent[n]].edge_count;
  uint32_t offset = 0;
  for (Node& node : nodes_) {
    node.first_edge = offset;
    offset += node.edge_count;
    node.edge_count = 0;
  }
  edge_byte_.resize(offset);
  edge_child_.resize(offset);
  for (size_t n = 1; n < nodes_.size(); ++n) {
    Node& p = nodes_[parent[n]];
    edge_byte_[p.first_edge + p.edge_count] = byte_in[n];
    edge_child_[p.first_edge + p.edge_count] = static_cast<uint32_t>(n);
    ++p.edge_count;
  }
}

const std::string* TokenTrie::token_bytes(int32_t id) const {
  if (id < 0 || id >= vocab_size_ || !included_[id]) return nullptr;
  return &bytes_[id];
}

namespace {

// The distinct matcher states of one walk, each with its transitions by byte as they are found.
// Most of a vocabulary's bytes lead back to a few states (inside a JSON string, every ordinary
// character returns to the same one), so the walk computes each (state, byte) step once and
// then only follows integers down the trie.
class StateTable {
 public:
  static constexpr int32_t kUnknown = -2, kDead = -1;

  int32_t intern(GrammarState state) {
    std::string key = key_of(state);
    const auto [it, added] = ids_.try_emplace(std::move(key), static_cast<int32_t>(states_.size()));
    if (added) {
      states_.push_back(std::move(state));
      next_.emplace_back();
      next_.back().fill(kUnknown);
    }
    return it->second;
  }

  int32_t step(const Grammar& grammar, int32_t from, uint8_t byte) {
    int32_t& to = next_[static_cast<size_t>(from)][byte];
    if (to == kUnknown) {
      GrammarState next;
      const int32_t id = grammar_advance_byte(grammar, states_[static_cast<size_t>(from)], byte, next)
                             ? intern(std::move(next))
                             : kDead;
      next_[static_cast<size_t>(from)][byte] = id;  // `to` may dangle: intern grew next_
      return id;
    }
    return to;
  }

 private:
  static std::string key_of(const GrammarState& state) {
    std::string key;
    const auto put = [&](uint32_t v) { key.append(reinterpret_cast<const char*>(&v), sizeof v); };
    put(state.partial);
    put(state.remaining | (static_cast<uint32_t>(state.length) << 8));
    for (const GrammarStack& stack : state.stacks) {
      put(static_cast<uint32_t>(stack.size()));
      for (const GrammarPos& pos : stack) {
        put(pos.rule);
        put(pos.at);
      }
    }
    return key;
  }

  std::unordered_map<std::string, int32_t> ids_;
  std::vector<GrammarState> states_;
  std::vector<std::array<int32_t, 256>> next_;
};

}  // namespace

std::vector<int32_t> TokenTrie::allowed_tokens(const Grammar& grammar, const GrammarState& state) const {
  std::vector<int32_t> allowed;
  StateTable table;
  // A depth-first walk; each entry is a node and the matcher's state after its bytes.
  std::vector<std::pair<uint32_t, int32_t>> todo;
  todo.emplace_back(0, table.intern(state));
  while (!todo.empty()) {
    const auto [index, at] = todo.back();
    todo.pop_back();
    const Node& node = nodes_[index];
    for (uint32_t t = 0; t < node.token_count; ++t) allowed.push_back(sorted_ids_[node.first_token + t]);
    for (uint32_t e = node.first_edge; e < node.first_edge + node.edge_count; ++e) {
      const int32_t next = table.step(grammar, at, edge_byte_[e]);
      if (next != StateTable::kDead) todo.emplace_back(edge_child_[e], next);
    }
  }
  std::ranges::sort(allowed);
  return allowed;
}

namespace {

class GrammarConstraint final : public TokenConstraint {
 public:
  GrammarConstraint(std::shared_ptr<const Grammar> grammar, std::shared_ptr<const TokenTrie> trie)
      : grammar_(std::move(grammar)), trie_(std::move(trie)), state_(grammar_initial_state(*grammar_)) {}

  void mask(std::span<float> logits) override {
    const std::vector<int32_t> allowed = trie_->allowed_tokens(*grammar_, state_);
    size_t next = 0;  // into allowed
    for (size_t id = 0; id < logits.size(); ++id) {
      if (next < allowed.size() && static_cast<size_t>(allowed[next]) == id) {
        ++next;
        continue;
      }
      logits[id] = -std::numeric_limits<float>::infinity();
    }
  }

  void accept(int32_t token) override {
    const std::string* bytes = trie_->token_bytes(token);
    GrammarState next = state_;
    if (bytes == nullptr || !grammar_advance_bytes(*grammar_, next, *bytes))
      throw Error("token " + std::to_string(token) + " is not allowed by the grammar at this point");
    state_ = std::move(next);
  }

  bool may_end() const override { return grammar_may_end(state_); }
  bool must_end() const override { return grammar_must_end(state_); }

  std::unique_ptr<TokenConstraint> clone() const override {
    return std::make_unique<GrammarConstraint>(*this);
  }

 private:
  std::shared_ptr<const Grammar> grammar_;
  std::shared_ptr<const TokenTrie> trie_;
  GrammarState state_;
};

}  // namespace

std::unique_ptr<TokenConstraint> make_grammar_constraint(std::shared_ptr<const Grammar> grammar,
                                                         std::shared_ptr<const TokenTrie> trie) {
  MB_CHECK(grammar != nullptr && trie != nullptr);
  return std::make_unique<GrammarConstraint>(std::move(grammar), std::move(trie));
}

}  // namespace mb

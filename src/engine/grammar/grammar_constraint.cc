// SPDX-License-Identifier: MIT
#include "engine/grammar/grammar_constraint.h"

#include <algorithm>
#include <limits>

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

std::vector<int32_t> TokenTrie::allowed_tokens(const Grammar& grammar, const GrammarState& state) const {
  std::vector<int32_t> allowed;
  // A depth-first walk; each frame holds the matcher's state after its node's bytes.
  struct Frame {
    uint32_t node;
    GrammarState state;
  };
  std::vector<Frame> todo;
  todo.push_back({0, state});
  GrammarState next;
  while (!todo.empty()) {
    Frame frame = std::move(todo.back());
    todo.pop_back();
    const Node& node = nodes_[frame.node];
    for (uint32_t t = 0; t < node.token_count; ++t) allowed.push_back(sorted_ids_[node.first_token + t]);
    for (uint32_t e = node.first_edge; e < node.first_edge + node.edge_count; ++e)
      if (grammar_advance_byte(grammar, frame.state, edge_byte_[e], next))
        todo.push_back({edge_child_[e], next});
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

// SPDX-License-Identifier: MIT
// A GBNF grammar as a TokenConstraint (engine/token_constraint.h): each step's allowed set is
// found by walking a trie of the vocabulary's byte strings with the grammar's matcher, so tokens
// sharing a prefix share the work of matching it, and a branch the grammar refuses is never
// entered (inside a JSON number, the walk touches the few digit branches, whatever the
// vocabulary's size).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/grammar/gbnf.h"
#include "engine/grammar/grammar_matcher.h"
#include "engine/token_constraint.h"
#include "tokenizer/tokenizer.h"

namespace mb {

// The vocabulary's tokens by their bytes (Tokenizer::token_bytes: what the detokenizer emits).
// Special tokens (end of text, chat markers) and tokens without bytes are left out, so a grammar
// never allows them; the end of sequence is the decoder's (TokenConstraint::may_end). Built once
// per tokenizer (a pass over the vocabulary) and shared, read-only, by every request.
class TokenTrie {
 public:
  explicit TokenTrie(const Tokenizer& tokenizer);

  int32_t vocab_size() const { return vocab_size_; }
  // The bytes of `id`, or null for an id the trie leaves out.
  const std::string* token_bytes(int32_t id) const;

  // Ids whose bytes `state` may read next (ascending order), found by one walk over the trie.
  std::vector<int32_t> allowed_tokens(const Grammar& grammar, const GrammarState& state) const;

 private:
  struct Node {
    uint32_t first_edge = 0;
    uint32_t edge_count = 0;
    uint32_t first_token = 0;  // into sorted_ids_: the ids whose bytes end here
    uint32_t token_count = 0;
  };
  int32_t vocab_size_ = 0;
  std::vector<std::string> bytes_;   // per id
  std::vector<uint8_t> included_;    // per id
  std::vector<int32_t> sorted_ids_;  // included ids, ordered by their bytes
  std::vector<Node> nodes_;          // nodes_[0] is the root (the empty string)
  std::vector<uint8_t> edge_byte_;   // per edge, grouped by parent, in byte order
  std::vector<uint32_t> edge_child_;
};

// A constraint that allows exactly the tokens after which the text can still match `grammar`,
// and an end of sequence once it is complete. Both pointers must be non-null.
std::unique_ptr<TokenConstraint> make_grammar_constraint(std::shared_ptr<const Grammar> grammar,
                                                         std::shared_ptr<const TokenTrie> trie);

}  // namespace mb

// SPDX-License-Identifier: MIT
#include "server/request_constraint.h"

#include "engine/grammar/gbnf.h"

namespace mb::server {

void compile_request_constraint(ApiRequest& request, const Tokenizer& tokenizer,
                                const std::shared_ptr<const TokenTrie>& trie) {
  if (!request.grammar) return;
  std::shared_ptr<const Grammar> grammar;
  try {
    grammar = std::make_shared<const Grammar>(parse_gbnf(*request.grammar));
  } catch (const Error& e) {
    throw invalid_request(std::string("grammar: ") + e.what(), "invalid_grammar");
  }
  const std::shared_ptr<const TokenTrie> tokens = trie ? trie : std::make_shared<const TokenTrie>(tokenizer);
  request.serve.constraint = make_grammar_constraint(std::move(grammar), tokens);
}

}  // namespace mb::server

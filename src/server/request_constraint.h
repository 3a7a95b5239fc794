// SPDX-License-Identifier: MIT
// The one place a request's output constraint is compiled: the GBNF text of ApiRequest::grammar
// (the request's "grammar" field, or what the schema and tool-choice code write there) becomes
// ServeRequest::constraint, with the server's TokenTrie.
#pragma once

#include <memory>

#include "engine/grammar/grammar_constraint.h"
#include "server/openai_api.h"

namespace mb::server {

// Compiles request.grammar, if any, into request.serve.constraint. `trie` is the server's, built
// once per tokenizer; without one (callers that keep none) it is built here from `tokenizer`, a
// pass over the vocabulary. A grammar that does not parse is an ApiError (400, code
// "invalid_grammar") naming the problem and its line:column.
void compile_request_constraint(ApiRequest& request, const Tokenizer& tokenizer,
                                const std::shared_ptr<const TokenTrie>& trie);

}  // namespace mb::server

// SPDX-License-Identifier: MIT
// llama.cpp's --grammar TEXT and --grammar-file FILE for `generate` and `run`: GBNF that the
// output must match (engine/grammar/gbnf.h), applied through the same TokenConstraint as the
// server's "grammar" field.
#pragma once

#include <CLI/CLI.hpp>
#include <memory>
#include <string>

#include "engine/token_constraint.h"
#include "tokenizer/tokenizer.h"

namespace mb::cli {

struct GrammarFlags {
  std::string text, file;
};

void add_grammar_flags(CLI::App& cmd, GrammarFlags& flags);
// The constraint the flags ask for, or null without them. Throws mb::Error naming the flag and
// the grammar's problem (line:column), or that a grammar needs the checkpoint's tokenizer.
std::shared_ptr<TokenConstraint> resolve_grammar(const GrammarFlags& flags, const Tokenizer* tokenizer);

}  // namespace mb::cli

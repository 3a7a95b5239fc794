// SPDX-License-Identifier: MIT
#include "grammar_flags.h"

#include "core/error.h"
#include "engine/grammar/gbnf.h"
#include "engine/grammar/grammar_constraint.h"
#include "io/file_io.h"

namespace mb::cli {

void add_grammar_flags(CLI::App& cmd, GrammarFlags& flags) {
  auto* text =
      cmd.add_option("--grammar", flags.text, "GBNF grammar the output must match (llama.cpp's syntax)");
  auto* file = cmd.add_option("--grammar-file", flags.file, "Read the GBNF grammar from a file");
  text->excludes(file);
}

std::shared_ptr<TokenConstraint> resolve_grammar(const GrammarFlags& flags, const Tokenizer* tokenizer) {
  if (flags.text.empty() && flags.file.empty()) return nullptr;
  const char* flag = flags.file.empty() ? "--grammar" : "--grammar-file";
  const std::string text = flags.file.empty()
                               ? flags.text
                               : read_file_limited(flags.file, GbnfLimits::kMaxTextBytes, "grammar file");
  if (tokenizer == nullptr)
    throw Error(std::string(flag) +
                " needs the checkpoint's tokenizer (a grammar matches text), and it has none");
  std::shared_ptr<const Grammar> grammar;
  try {
    grammar = std::make_shared<const Grammar>(parse_gbnf(text));
  } catch (const Error& e) {
    throw Error(std::string(flag) + ": " + e.what());
  }
  return make_grammar_constraint(std::move(grammar), std::make_shared<const TokenTrie>(*tokenizer));
}

}  // namespace mb::cli

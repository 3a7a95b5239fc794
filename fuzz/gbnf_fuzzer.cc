// SPDX-License-Identifier: MIT
// Fuzzes the GBNF parser (the request's "grammar" field, --grammar) and the matcher it feeds:
// the bytes up to the first NUL are the grammar, up to 64 bytes after it a text the matcher
// reads byte by byte. Bad grammars must be refused with mb::Error, and the matcher must hold
// its bounds (stack count, expansion work) on every grammar the parser accepts.
#include <cstdio>
#include <cstdlib>
#include <string_view>

#include "engine/grammar/gbnf.h"
#include "engine/grammar/grammar_matcher.h"
#include "fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view all(reinterpret_cast<const char*>(data), size);
  const size_t split = all.find('\0');
  const std::string_view grammar_text = all.substr(0, split);
  const std::string_view input =
      split == std::string_view::npos ? std::string_view() : all.substr(split + 1, 64);
  mb::fuzz::expect_clean_refusal([&] {
    const mb::Grammar grammar = mb::parse_gbnf(grammar_text);
    if (grammar.root >= grammar.rules.size()) {
      std::fprintf(stderr, "parse_gbnf returned a root outside its rules\n");
      std::abort();
    }
    mb::GrammarState state = mb::grammar_initial_state(grammar);
    mb::GrammarState next;
    for (char c : input) {
      if (!mb::grammar_advance_byte(grammar, state, static_cast<uint8_t>(c), next)) break;
      std::swap(state, next);
      if (mb::grammar_must_end(state) && !mb::grammar_may_end(state)) {
        std::fprintf(stderr, "a state that must end may not end\n");
        std::abort();
      }
    }
  });
  return 0;
}

// SPDX-License-Identifier: MIT
// The pushdown matcher of a parsed GBNF grammar (gbnf.h), as llama.cpp's llama_grammar walks
// one: a state is the set of parse stacks the text so far leaves possible, each stack the
// positions still to match, innermost last, its top always a character element. A code point
// advances every stack whose top matches it; a stack emptied by the end of `root` means the text
// is complete.
//
// Text arrives as bytes (a token may end inside a UTF-8 character): the state also carries the
// character begun and not finished, and a partial character keeps only the stacks one of its
// possible completions could advance, so a token that splits a character is allowed exactly when
// some completion can follow.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "engine/grammar/gbnf.h"

namespace mb {

struct GrammarPos {
  uint32_t rule = 0;
  uint32_t at = 0;  // index of an element in grammar.rules[rule]
  auto operator<=>(const GrammarPos&) const = default;
};
using GrammarStack = std::vector<GrammarPos>;

struct GrammarState {
  std::vector<GrammarStack> stacks;  // sorted, without duplicates; empty: no text can follow
  uint32_t partial = 0;              // the bits of a character begun, when remaining > 0
  uint8_t remaining = 0;             // its continuation bytes still to come
  uint8_t length = 0;                // its length in bytes
};

// The bounds of one step: parse stacks alive at once and the expansion work of one character.
// A grammar ambiguous enough to pass them fails the request with an mb::Error naming them.
struct GrammarMatchLimits {
  static constexpr size_t kMaxStacks = 4096;
  static constexpr size_t kMaxExpansions = 200'000;
};

// The state before any text.
GrammarState grammar_initial_state(const Grammar& grammar);

// Whether `byte` may come next; if so, `out` is the state after it (`out` may not be `in`).
bool grammar_advance_byte(const Grammar& grammar, const GrammarState& in, uint8_t byte, GrammarState& out);

// Advances `state` past `bytes` in place; false (state unspecified) when some byte may not come.
bool grammar_advance_bytes(const Grammar& grammar, GrammarState& state, std::string_view bytes);

// The text so far is a complete match of root (an empty stack), with no character half-read.
bool grammar_may_end(const GrammarState& state);
// Nothing may follow: every stack is empty.
bool grammar_must_end(const GrammarState& state);

}  // namespace mb

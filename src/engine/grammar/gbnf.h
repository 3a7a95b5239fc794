// SPDX-License-Identifier: MIT
// GBNF grammars as llama.cpp and llama-server take them (the request's "grammar" field, the
// CLI's --grammar), parsed into the flat element form llama.cpp's matcher walks.
//
// The syntax: rules `name ::= alternatives`, one per line (a rule continues on the next line
// only inside parentheses or after `|`); `root` is the start rule; literals "..." with the
// escapes \n \r \t \" \\ \[ \] \xNN \uNNNN \UNNNNNNNN; character classes [a-z0-9_] and [^...]
// (same escapes); `.` for any character; grouping ( ); alternation |; repetition * + ? {m}
// {m,} {m,n}; rule references; comments from # to the end of the line. Names are letters,
// digits, '-' and '_'. Everything is in Unicode code points: a literal's UTF-8 text becomes one
// element per character.
//
// Repetitions and groups are rewritten into generated rules, as llama.cpp does (`x*` is
// `x_N ::= x x_N | `), so the matcher only ever sees sequences, alternatives and references.
// Left recursion (a rule that can reach itself again without consuming a character) cannot be
// walked by a pushdown matcher and is refused by name, as llama.cpp refuses it.
//
// The text is untrusted (it comes from HTTP requests): its size, the number of rules, the depth
// of nested groups, repetition counts and the expanded size are bounded, and every refusal is an
// mb::Error naming line:column and the problem.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace mb {

enum class GrammarOp : uint8_t {
  End,             // ends a rule's last alternative
  Alt,             // ends an alternative that another follows
  RuleRef,         // value: the rule's index
  Char,            // value: a code point; starts a positive class (or one literal character)
  CharNot,         // value: a code point; starts a negated class [^...]
  CharRangeUpper,  // value: the upper end of a range whose lower end is the element before
  CharAlt,         // value: another code point of the class started before
  CharAny,         // `.`, or a class member matching any code point
};

struct GrammarElement {
  GrammarOp op = GrammarOp::End;
  uint32_t value = 0;
  bool operator==(const GrammarElement&) const = default;
};

struct Grammar {
  // rules[i]: its alternatives' elements, each alternative ended by Alt, the last by End.
  std::vector<std::vector<GrammarElement>> rules;
  // rule_names[i]: the name written in the text, or a generated one (`name_N`) for a group or a
  // repetition inside rule `name`.
  std::vector<std::string> rule_names;
  uint32_t root = 0;
};

// The bounds a grammar must keep to; refusals name the one broken.
struct GbnfLimits {
  static constexpr size_t kMaxTextBytes = 256 * 1024;
  static constexpr size_t kMaxRules = 10'000;         // written and generated
  static constexpr int kMaxNesting = 64;              // nested parentheses
  static constexpr uint64_t kMaxRepetition = 10'000;  // m and n of {m,n}
  static constexpr size_t kMaxElements = 1'000'000;   // elements after expansion, all rules
};

// Throws mb::Error "grammar line L, column C: <problem>" (or without a position where the
// problem is the grammar as a whole): a syntax error, an unknown escape, a bad UTF-8 byte, an
// undefined rule, a missing root rule, left recursion, or a broken bound.
Grammar parse_gbnf(std::string_view text);

// Whether `element` (the start of a character class) matches the code point `c`.
bool grammar_char_matches(const GrammarElement* element, uint32_t c);

}  // namespace mb

// SPDX-License-Identifier: MIT
#include "engine/grammar/grammar_matcher.h"

#include <algorithm>
#include <string>
#include <utility>

#include "core/error.h"

namespace mb {

namespace {

bool ends_alt(const GrammarElement& e) {
  return e.op == GrammarOp::End || e.op == GrammarOp::Alt;
}

// Expands `stack` until its top is a character element (or it is empty), appending every
// resulting stack to `out`. A reference at the top is replaced by each alternative of its rule;
// a reference at the end of an alternative leaves nothing behind, so tail recursion does not
// grow the stack. Terminates because the parser refused left recursion.
void expand_stack(const Grammar& grammar, GrammarStack stack, std::vector<GrammarStack>& out, size_t& work) {
  std::vector<GrammarStack> todo;
  todo.push_back(std::move(stack));
  while (!todo.empty()) {
    GrammarStack s = std::move(todo.back());
    todo.pop_back();
    if (++work > GrammarMatchLimits::kMaxExpansions)
      throw Error("the grammar is too ambiguous: one character needs more than " +
                  std::to_string(GrammarMatchLimits::kMaxExpansions) + " expansion steps");
    if (s.empty()) {
      out.push_back(std::move(s));
      continue;
    }
    const GrammarPos top = s.back();
    const auto& rule = grammar.rules[top.rule];
    const GrammarElement& e = rule[top.at];
    if (e.op != GrammarOp::RuleRef) {
      out.push_back(std::move(s));
      continue;
    }
    s.pop_back();
    if (!ends_alt(rule[top.at + 1])) s.push_back({top.rule, top.at + 1});
    const auto& sub = grammar.rules[e.value];
    for (uint32_t a = 0; a < sub.size();) {
      GrammarStack next = s;
      if (!ends_alt(sub[a])) next.push_back({e.value, a});
      todo.push_back(std::move(next));
      while (!ends_alt(sub[a])) ++a;
      ++a;  // past the Alt (or the End, which ends the loop)
    }
  }
}

void normalize(std::vector<GrammarStack>& stacks) {
  std::sort(stacks.begin(), stacks.end());
  stacks.erase(std::unique(stacks.begin(), stacks.end()), stacks.end());
  if (stacks.size() > GrammarMatchLimits::kMaxStacks)
    throw Error("the grammar is too ambiguous: more than " + std::to_string(GrammarMatchLimits::kMaxStacks) +
                " parse stacks are alive at once");
}

// Whether the class starting at `element` matches some code point in [low, high] (surrogates
// excluded by the caller).
bool class_meets_span(const GrammarElement* element, uint32_t low, uint32_t high) {
  const bool positive = element->op != GrammarOp::CharNot;
  std::vector<std::pair<uint32_t, uint32_t>> members;
  do {
    if (element->op == GrammarOp::CharAny) {
      members.emplace_back(0, 0x10FFFF);
      ++element;
    } else if (element[1].op == GrammarOp::CharRangeUpper) {
      members.emplace_back(element->value, element[1].value);
      element += 2;
    } else {
      members.emplace_back(element->value, element->value);
      ++element;
    }
  } while (element->op == GrammarOp::CharAlt);
  if (positive)
    return std::ranges::any_of(members, [&](const auto& m) { return m.first <= high && low <= m.second; });
  // Negated: some point of [low, high] lies outside every member.
  std::ranges::sort(members);
  uint32_t next = low;  // the smallest point not yet known to be covered
  for (const auto& [lo, hi] : members) {
    if (lo > next) return next <= high;
    if (hi >= next) {
      if (hi >= high) return false;
      next = hi + 1;
    }
  }
  return next <= high;
}

// Whether the class matches some character (not a surrogate, which UTF-8 never encodes) in
// [low, high], so that a partial character can still become one it matches.
bool class_meets_range(const GrammarElement* element, uint32_t low, uint32_t high) {
  constexpr uint32_t kFirstSurrogate = 0xD800, kLastSurrogate = 0xDFFF;
  if (low < kFirstSurrogate && class_meets_span(element, low, std::min(high, kFirstSurrogate - 1)))
    return true;
  return high > kLastSurrogate && class_meets_span(element, std::max(low, kLastSurrogate + 1), high);
}

// After the class whose first element is at `at`.
uint32_t past_class(const std::vector<GrammarElement>& rule, uint32_t at) {
  ++at;
  while (rule[at].op == GrammarOp::CharAlt || rule[at].op == GrammarOp::CharRangeUpper) ++at;
  return at;
}

bool advance_char(const Grammar& grammar, const std::vector<GrammarStack>& stacks, uint32_t c,
                  std::vector<GrammarStack>& out) {
  out.clear();
  size_t work = 0;
  for (const GrammarStack& s : stacks) {
    if (s.empty()) continue;
    const GrammarPos top = s.back();
    const auto& rule = grammar.rules[top.rule];
    if (!grammar_char_matches(&rule[top.at], c)) continue;
    GrammarStack next(s.begin(), s.end() - 1);
    const uint32_t after = past_class(rule, top.at);
    if (!ends_alt(rule[after])) next.push_back({top.rule, after});
    expand_stack(grammar, std::move(next), out, work);
  }
  normalize(out);
  return !out.empty();
}

// The code points a character of `length` bytes whose first bits are `partial`, with
// `remaining` bytes to come, can still become (without overlong forms or values past U+10FFFF).
std::pair<uint32_t, uint32_t> partial_range(uint32_t partial, int remaining, int length) {
  const uint32_t shift = 6 * static_cast<uint32_t>(remaining);
  uint32_t low = partial << shift;
  uint32_t high = low | ((1u << shift) - 1);
  static constexpr uint32_t kSmallest[] = {0, 0, 0x80, 0x800, 0x10000};
  low = std::max(low, kSmallest[length]);
  high = std::min<uint32_t>(high, 0x10FFFF);
  return {low, high};
}

}  // namespace

GrammarState grammar_initial_state(const Grammar& grammar) {
  GrammarState state;
  size_t work = 0;
  const auto& root = grammar.rules[grammar.root];
  for (uint32_t a = 0; a < root.size();) {
    GrammarStack stack;
    if (!ends_alt(root[a])) stack.push_back({grammar.root, a});
    expand_stack(grammar, std::move(stack), state.stacks, work);
    while (!ends_alt(root[a])) ++a;
    ++a;
  }
  normalize(state.stacks);
  return state;
}

bool grammar_advance_byte(const Grammar& grammar, const GrammarState& in, uint8_t byte, GrammarState& out) {
  out.partial = 0;
  out.remaining = 0;
  out.length = 0;
  uint32_t value = 0;
  int remaining = 0, length = 0;
  if (in.remaining == 0) {
    if (byte < 0x80) return advance_char(grammar, in.stacks, byte, out.stacks);
    if (byte >= 0xC2 && byte <= 0xDF) {
      value = byte & 0x1F;
      remaining = 1;
    } else if (byte >= 0xE0 && byte <= 0xEF) {
      value = byte & 0x0F;
      remaining = 2;
    } else if (byte >= 0xF0 && byte <= 0xF4) {
      value = byte & 0x07;
      remaining = 3;
    } else {
      return false;  // a continuation byte, or a lead byte no valid character has
    }
    length = remaining + 1;
  } else {
    if ((byte & 0xC0) != 0x80) return false;
    value = (in.partial << 6) | (byte & 0x3F);
    remaining = in.remaining - 1;
    length = in.length;
    if (remaining == 0) {
      static constexpr uint32_t kSmallest[] = {0, 0, 0x80, 0x800, 0x10000};
      if (value < kSmallest[length] || value > 0x10FFFF || (value >= 0xD800 && value <= 0xDFFF)) return false;
      return advance_char(grammar, in.stacks, value, out.stacks);
    }
  }
  // Inside a character: keep the stacks some completion of it can advance.
  const auto [low, high] = partial_range(value, remaining, length);
  if (low > high) return false;
  out.stacks.clear();
  for (const GrammarStack& s : in.stacks) {
    if (s.empty()) continue;
    const GrammarPos top = s.back();
    if (class_meets_range(&grammar.rules[top.rule][top.at], low, high)) out.stacks.push_back(s);
  }
  out.partial = value;
  out.remaining = static_cast<uint8_t>(remaining);
  out.length = static_cast<uint8_t>(length);
  return !out.stacks.empty();
}

bool grammar_advance_bytes(const Grammar& grammar, GrammarState& state, std::string_view bytes) {
  GrammarState next;
  for (char b : bytes) {
    if (!grammar_advance_byte(grammar, state, static_cast<uint8_t>(b), next)) return false;
    std::swap(state, next);
  }
  return true;
}

bool grammar_may_end(const GrammarState& state) {
  return state.remaining == 0 && std::ranges::any_of(state.stacks, [](const auto& s) { return s.empty(); });
}

bool grammar_must_end(const GrammarState& state) {
  return state.remaining == 0 && !state.stacks.empty() &&
         std::ranges::all_of(state.stacks, [](const auto& s) { return s.empty(); });
}

}  // namespace mb

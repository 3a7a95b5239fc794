// SPDX-License-Identifier: MIT
// The GBNF parser: a recursive descent over the text, after llama.cpp's grammar-parser, with the
// bounds an HTTP request's text needs (see gbnf.h).
#include "engine/grammar/gbnf.h"

#include <optional>
#include <unordered_map>

#include "core/error.h"

namespace mb {

namespace {

bool is_name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
}

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

bool ends_alternative(const GrammarElement& e) {
  return e.op == GrammarOp::End || e.op == GrammarOp::Alt;
}

class GbnfParser {
 public:
  explicit GbnfParser(std::string_view text) : text_(text) {}

  Grammar parse() {
    if (text_.size() > GbnfLimits::kMaxTextBytes)
      throw Error("the grammar is " + std::to_string(text_.size()) + " bytes, more than the limit of " +
                  std::to_string(GbnfLimits::kMaxTextBytes));
    skip_space(true);
    while (pos_ < text_.size()) parse_rule();
    for (size_t id = 0; id < rules_.size(); ++id)
      if (!defined_[id]) fail(first_ref_[id], "undefined rule '" + names_[id] + "'");
    const auto root = ids_.find("root");
    if (root == ids_.end()) throw Error("the grammar has no 'root' rule (the start rule must be named root)");
    Grammar grammar;
    grammar.rules = std::move(rules_);
    grammar.rule_names = std::move(names_);
    grammar.root = root->second;
    refuse_left_recursion(grammar);
    return grammar;
  }

 private:
  [[noreturn]] void fail(size_t at, const std::string& problem) const {
    size_t line = 1, column = 1;
    for (size_t i = 0; i < at && i < text_.size(); ++i) {
      if (text_[i] == '\n') {
        ++line;
        column = 1;
      } else if ((static_cast<unsigned char>(text_[i]) & 0xC0) != 0x80) {
        ++column;  // columns count characters, not UTF-8 continuation bytes
      }
    }
    throw Error("grammar line " + std::to_string(line) + ", column " + std::to_string(column) + ": " +
                problem);
  }

  char peek(size_t ahead = 0) const { return pos_ + ahead < text_.size() ? text_[pos_ + ahead] : '\0'; }
  bool at_end() const { return pos_ >= text_.size(); }

  uint32_t new_rule(std::string name) {
    if (rules_.size() >= GbnfLimits::kMaxRules)
      fail(pos_, "the grammar has more than " + std::to_string(GbnfLimits::kMaxRules) +
                     " rules (written and generated for groups and repetitions)");
    rules_.emplace_back();
    names_.push_back(std::move(name));
    defined_.push_back(false);
    first_ref_.push_back(pos_);
    return static_cast<uint32_t>(rules_.size() - 1);
  }

  uint32_t symbol_id(std::string_view name, size_t at) {
    const auto found = ids_.find(std::string(name));
    if (found != ids_.end()) return found->second;
    const uint32_t id = new_rule(std::string(name));
    first_ref_[id] = at;
    ids_.emplace(std::string(name), id);
    return id;
  }

  // A rule for a group or a repetition; its name is not registered, so no written name clashes.
  uint32_t generated_rule(const std::string& base) {
    const uint32_t id = new_rule(base + "_" + std::to_string(rules_.size()));
    defined_[id] = true;
    return id;
  }

  void count_elements(size_t added) {
    elements_ += added;
    if (elements_ > GbnfLimits::kMaxElements)
      fail(pos_, "the grammar expands to more than " + std::to_string(GbnfLimits::kMaxElements) +
                     " elements (repetitions are written out)");
  }

  void set_rule(uint32_t id, std::vector<GrammarElement> elements) {
    count_elements(elements.size());
    rules_[id] = std::move(elements);
  }

  void skip_space(bool newline_ok) {
    while (!at_end()) {
      const char c = peek();
      if (c == '#') {
        while (!at_end() && peek() != '\n' && peek() != '\r') ++pos_;
      } else if (c == ' ' || c == '\t' || (newline_ok && (c == '\r' || c == '\n'))) {
        ++pos_;
      } else {
        break;
      }
    }
  }

  std::string_view parse_name() {
    const size_t start = pos_;
    while (!at_end() && is_name_char(peek())) ++pos_;
    if (pos_ == start) fail(start, "expecting a rule name");
    return text_.substr(start, pos_ - start);
  }

  uint32_t parse_hex(int digits) {
    const size_t start = pos_;
    uint32_t value = 0;
    for (int i = 0; i < digits; ++i) {
      const int d = hex_value(peek());
      if (d < 0) fail(start, "expecting " + std::to_string(digits) + " hex digits after the escape");
      value = value * 16 + static_cast<uint32_t>(d);
      ++pos_;
    }
    if (value > 0x10FFFF) fail(start, "the escape names a value past U+10FFFF, which is no character");
    return value;
  }

  // One character of a literal or class: an escape, or one UTF-8 encoded code point.
  uint32_t parse_char() {
    const size_t start = pos_;
    if (peek() == '\\') {
      ++pos_;
      const char e = peek();
      ++pos_;
      switch (e) {
        case 'x':
          return parse_hex(2);
        case 'u':
          return parse_hex(4);
        case 'U':
          return parse_hex(8);
        case 't':
          return '\t';
        case 'r':
          return '\r';
        case 'n':
          return '\n';
        case '\\':
        case '"':
        case '[':
        case ']':
          return static_cast<unsigned char>(e);
        default:
          if (start + 1 >= text_.size()) fail(start, "the text ends inside an escape");
          fail(start, std::string("unknown escape '\\") + e + "'");
      }
    }
    const auto lead = static_cast<unsigned char>(peek());
    ++pos_;
    if (lead < 0x80) return lead;
    int more = 0;
    uint32_t value = 0;
    if ((lead & 0xE0) == 0xC0) {
      more = 1;
      value = lead & 0x1F;
    } else if ((lead & 0xF0) == 0xE0) {
      more = 2;
      value = lead & 0x0F;
    } else if ((lead & 0xF8) == 0xF0) {
      more = 3;
      value = lead & 0x07;
    } else {
      fail(start, "the text is not valid UTF-8");
    }
    for (int i = 0; i < more; ++i) {
      const auto next = static_cast<unsigned char>(peek());
      if (at_end() || (next & 0xC0) != 0x80) fail(start, "the text is not valid UTF-8");
      value = (value << 6) | (next & 0x3F);
      ++pos_;
    }
    static constexpr uint32_t kSmallest[] = {0, 0x80, 0x800, 0x10000};
    if (value < kSmallest[more] || value > 0x10FFFF || (value >= 0xD800 && value <= 0xDFFF))
      fail(start, "the text is not valid UTF-8");
    return value;
  }

  void parse_rule() {
    const size_t start = pos_;
    const std::string_view name = parse_name();
    skip_space(false);
    const uint32_t id = symbol_id(name, start);
    if (defined_[id]) fail(start, "rule '" + std::string(name) + "' is defined twice");
    defined_[id] = true;
    if (text_.substr(pos_, 3) != "::=")
      fail(pos_, "expecting ::= after the rule name '" + std::string(name) + "'");
    pos_ += 3;
    skip_space(true);
    parse_alternates(std::string(name), id, false);
    if (peek() == '\r') ++pos_;
    if (peek() == '\n') {
      ++pos_;
    } else if (!at_end()) {
      fail(pos_, std::string("unexpected '") + peek() + "' (expecting a newline or the end of the rule)");
    }
    skip_space(true);
  }

  void parse_alternates(const std::string& rule_name, uint32_t id, bool nested) {
    std::vector<GrammarElement> rule;
    parse_sequence(rule_name, rule, nested);
    while (peek() == '|') {
      rule.push_back({GrammarOp::Alt, 0});
      ++pos_;
      skip_space(true);
      parse_sequence(rule_name, rule, nested);
    }
    rule.push_back({GrammarOp::End, 0});
    set_rule(id, std::move(rule));
  }

  uint64_t parse_count() {
    const size_t start = pos_;
    uint64_t value = 0;
    while (peek() >= '0' && peek() <= '9') {
      value = value * 10 + static_cast<uint64_t>(peek() - '0');
      if (value > GbnfLimits::kMaxRepetition)
        fail(start, "repetition count past the limit of " + std::to_string(GbnfLimits::kMaxRepetition));
      ++pos_;
    }
    if (pos_ == start) fail(start, "expecting a number in the repetition {m,n}");
    return value;
  }

  // Rewrites the last item (out[last..]) as llama.cpp does: S{m,n} is m copies of S followed by
  // n - m nested optional rules (S' ::= S S'' | ), S{m,} by m copies and S' ::= S S' | .
  void repeat(const std::string& rule_name, std::vector<GrammarElement>& out, size_t last, uint64_t min_times,
              std::optional<uint64_t> max_times) {
    const std::vector<GrammarElement> item(out.begin() + static_cast<std::ptrdiff_t>(last), out.end());
    if (min_times == 0) {
      out.resize(last);
    } else {
      for (uint64_t i = 1; i < min_times; ++i) {
        count_elements(item.size());
        out.insert(out.end(), item.begin(), item.end());
      }
    }
    const uint64_t optional_count = max_times ? *max_times - min_times : 1;
    uint32_t previous = 0;
    for (uint64_t i = 0; i < optional_count; ++i) {
      const uint32_t id = generated_rule(rule_name);
      std::vector<GrammarElement> rule = item;
      if (!max_times)
        rule.push_back({GrammarOp::RuleRef, id});
      else if (i > 0)
        rule.push_back({GrammarOp::RuleRef, previous});
      rule.push_back({GrammarOp::Alt, 0});
      rule.push_back({GrammarOp::End, 0});
      set_rule(id, std::move(rule));
      previous = id;
    }
    if (optional_count > 0) out.push_back({GrammarOp::RuleRef, previous});
  }

  void parse_sequence(const std::string& rule_name, std::vector<GrammarElement>& out, bool nested) {
    size_t last = out.size();  // where the last item starts; == out.size() when there is none
    const size_t sequence_start = out.size();
    while (!at_end()) {
      const size_t start = pos_;
      const char c = peek();
      if (c == '"') {
        ++pos_;
        last = out.size();
        while (peek() != '"') {
          if (at_end()) fail(start, "unterminated literal (a \" without its closing \")");
          out.push_back({GrammarOp::Char, parse_char()});
        }
        ++pos_;
        count_elements(out.size() - last);
        skip_space(nested);
      } else if (c == '[') {
        ++pos_;
        GrammarOp first = GrammarOp::Char;
        if (peek() == '^') {
          ++pos_;
          first = GrammarOp::CharNot;
        }
        last = out.size();
        while (peek() != ']') {
          if (at_end()) fail(start, "unterminated character class (a [ without its closing ])");
          const uint32_t low = parse_char();
          out.push_back({out.size() > last ? GrammarOp::CharAlt : first, low});
          if (peek() == '-' && peek(1) != ']' && pos_ + 1 < text_.size()) {
            ++pos_;
            const size_t upper_at = pos_;
            const uint32_t high = parse_char();
            if (high < low) fail(upper_at, "the range's upper end is below its lower end");
            out.push_back({GrammarOp::CharRangeUpper, high});
          }
        }
        if (out.size() == last) fail(start, "empty character class");
        ++pos_;
        count_elements(out.size() - last);
        skip_space(nested);
      } else if (is_name_char(c)) {
        const std::string_view name = parse_name();
        const uint32_t id = symbol_id(name, start);
        skip_space(nested);
        last = out.size();
        out.push_back({GrammarOp::RuleRef, id});
        count_elements(1);
      } else if (c == '(') {
        ++pos_;
        if (++depth_ > GbnfLimits::kMaxNesting)
          fail(start, "groups nested more than " + std::to_string(GbnfLimits::kMaxNesting) + " deep");
        skip_space(true);
        const uint32_t id = generated_rule(rule_name);
        parse_alternates(rule_name, id, true);
        --depth_;
        if (peek() != ')') fail(start, "unbalanced parentheses: this ( has no closing )");
        ++pos_;
        last = out.size();
        out.push_back({GrammarOp::RuleRef, id});
        count_elements(1);
        skip_space(nested);
      } else if (c == '.') {
        ++pos_;
        last = out.size();
        out.push_back({GrammarOp::CharAny, 0});
        count_elements(1);
        skip_space(nested);
      } else if (c == '*' || c == '+' || c == '?') {
        if (last == out.size() || last < sequence_start)
          fail(start, std::string("'") + c + "' has no item before it to repeat");
        ++pos_;
        repeat(rule_name, out, last, c == '+' ? 1 : 0, c == '?' ? std::optional<uint64_t>(1) : std::nullopt);
        last = out.size();  // a repetition cannot be repeated again without parentheses
        skip_space(nested);
      } else if (c == '{') {
        if (last == out.size() || last < sequence_start) fail(start, "'{' has no item before it to repeat");
        ++pos_;
        skip_space(nested);
        const uint64_t min_times = parse_count();
        skip_space(nested);
        std::optional<uint64_t> max_times = min_times;
        if (peek() == ',') {
          ++pos_;
          skip_space(nested);
          max_times.reset();  // {m,}: unbounded
          if (peek() >= '0' && peek() <= '9') max_times = parse_count();
          skip_space(nested);
        }
        if (peek() != '}') fail(pos_, "expecting '}' to close the repetition {m,n}");
        ++pos_;
        if (max_times && *max_times < min_times)
          fail(start, "repetition {" + std::to_string(min_times) + "," + std::to_string(*max_times) +
                          "} has its maximum below its minimum");
        repeat(rule_name, out, last, min_times, max_times);
        last = out.size();
        skip_space(nested);
      } else if (c == ')' && !nested) {
        fail(start, "unbalanced parentheses: this ) has no opening (");
      } else if (c == '<') {
        fail(start, "token references (<...>) are not supported; write the token's text as a literal");
      } else {
        break;
      }
    }
  }

  // A rule that can reach itself before reading a character would make the matcher's expansion
  // loop for ever (llama.cpp refuses it too). Found by a depth-first walk over each rule's
  // leftmost references, looking past references to rules that can match the empty string.
  static void refuse_left_recursion(const Grammar& grammar) {
    const size_t n = grammar.rules.size();
    std::vector<char> nullable(n, 0);
    for (bool changed = true; changed;) {
      changed = false;
      for (size_t r = 0; r < n; ++r) {
        if (nullable[r]) continue;
        bool all = true;  // the current alternative's elements are all nullable so far
        for (const GrammarElement& e : grammar.rules[r]) {
          if (ends_alternative(e)) {
            if (all) {
              nullable[r] = 1;
              changed = true;
              break;
            }
            all = true;
          } else if (e.op != GrammarOp::RuleRef || !nullable[e.value]) {
            all = false;
          }
        }
      }
    }
    // 0: not seen, 1: on the walk's path, 2: done. An explicit stack: a chain of references
    // may be as long as the rule count.
    std::vector<char> color(n, 0);
    struct Frame {
      uint32_t rule;
      size_t at;     // the next element to look at
      bool blocked;  // the current alternative has read a character (or a non-nullable rule)
    };
    for (uint32_t start = 0; start < n; ++start) {
      if (color[start] != 0) continue;
      std::vector<Frame> stack{{start, 0, false}};
      color[start] = 1;
      while (!stack.empty()) {
        Frame& f = stack.back();
        const auto& rule = grammar.rules[f.rule];
        if (f.at >= rule.size()) {
          color[f.rule] = 2;
          stack.pop_back();
          continue;
        }
        const GrammarElement e = rule[f.at++];
        if (ends_alternative(e)) {
          f.blocked = false;
          continue;
        }
        if (f.blocked) continue;
        if (e.op != GrammarOp::RuleRef) {
          f.blocked = true;
          continue;
        }
        if (!nullable[e.value]) f.blocked = true;
        if (color[e.value] == 1)
          throw Error("the grammar is left-recursive: rule '" + grammar.rule_names[e.value] +
                      "' can reach itself again before reading a character (rewrite it with a repetition, "
                      "e.g. list ::= item (\",\" item)*)");
        if (color[e.value] == 0) {
          color[e.value] = 1;
          stack.push_back({e.value, 0, false});
        }
      }
    }
  }

  std::string_view text_;
  size_t pos_ = 0;
  std::vector<std::vector<GrammarElement>> rules_;
  std::vector<std::string> names_;
  std::unordered_map<std::string, uint32_t> ids_;
  std::vector<bool> defined_;
  std::vector<size_t> first_ref_;  // where each rule was first named, for "undefined rule"
  size_t elements_ = 0;
  int depth_ = 0;
};

}  // namespace

Grammar parse_gbnf(std::string_view text) {
  return GbnfParser(text).parse();
}

bool grammar_char_matches(const GrammarElement* element, uint32_t c) {
  const bool positive = element->op != GrammarOp::CharNot;
  bool found = false;
  do {
    if (element->op == GrammarOp::CharAny) {
      found = true;
      ++element;
    } else if (element[1].op == GrammarOp::CharRangeUpper) {
      found = found || (element->value <= c && c <= element[1].value);
      element += 2;
    } else {
      found = found || element->value == c;
      ++element;
    }
  } while (element->op == GrammarOp::CharAlt);
  return found == positive;
}

}  // namespace mb

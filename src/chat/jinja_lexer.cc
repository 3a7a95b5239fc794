// SPDX-License-Identifier: MIT
// The lexer: template text into tokens, with Jinja2's whitespace control applied to the text
// between tags as transformers configures it (trim_blocks, lstrip_blocks).
#include <algorithm>
#include <cctype>
#include <string>

#include "chat/jinja_ast.h"
#include "core/error.h"

namespace mb::chat {

namespace {

[[noreturn]] void fail(const std::string& problem, int line) {
  throw Error("chat template: " + problem + " at line " + std::to_string(line));
}

// Python's str.isspace for the ASCII range, which is what Jinja2's \s strips in templates.
bool is_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}
bool is_name_start(char c) {
  return std::isalpha(static_cast<unsigned char>(c)) || c == '_';
}
bool is_name_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
}
bool is_digit(char c) {
  return c >= '0' && c <= '9';
}

void rstrip(std::string& text) {
  while (!text.empty() && is_space(text.back())) text.pop_back();
}

int count_newlines(std::string_view text) {
  return static_cast<int>(std::count(text.begin(), text.end(), '\n'));
}

class Lexer {
 public:
  explicit Lexer(std::string_view raw) {
    // Jinja2 reads every newline sequence as "\n" and drops one trailing newline
    // (keep_trailing_newline is off in transformers' environment).
    src_.reserve(raw.size());
    for (size_t i = 0; i < raw.size(); ++i) {
      if (raw[i] == '\r') {
        src_ += '\n';
        if (i + 1 < raw.size() && raw[i + 1] == '\n') ++i;
      } else {
        src_ += raw[i];
      }
    }
    if (!src_.empty() && src_.back() == '\n') src_.pop_back();
  }

  std::vector<Token> run() {
    while (pos_ < src_.size()) {
      const size_t tag = find_tag(pos_);
      std::string text = src_.substr(pos_, tag - pos_);
      const int tag_line = line_ + count_newlines(text);
      if (tag == src_.size()) {
        if (!text.empty()) tokens_.push_back({TokenType::Text, std::move(text), line_});
        break;
      }
      const char kind = src_[tag + 1];  // '{', '%' or '#'
      const char modifier = tag + 2 < src_.size() ? src_[tag + 2] : '\0';
      const bool has_modifier = modifier == '-' || modifier == '+';
      if (modifier == '-') {
        rstrip(text);
      } else if (modifier != '+' && kind != '{') {
        // lstrip_blocks: whitespace alone on its line before a block or comment tag goes. The
        // text starts a line when it follows a newline in it, or a tag end that ate one.
        const size_t newline = text.rfind('\n');
        const size_t line_begin = newline == std::string::npos ? 0 : newline + 1;
        if (line_begin > 0 || line_starting_) {
          if (std::all_of(text.begin() + static_cast<std::ptrdiff_t>(line_begin), text.end(), is_space)) {
            text.resize(line_begin);
          }
        }
      }
      if (!text.empty()) tokens_.push_back({TokenType::Text, std::move(text), line_});
      line_ = tag_line;
      pos_ = tag + 2 + (has_modifier ? 1 : 0);
      if (kind == '#') {
        lex_comment();
      } else if (kind == '%' && try_raw()) {
        continue;
      } else {
        lex_tag(kind == '{');
      }
    }
    tokens_.push_back({TokenType::Eof, "", line_});
    return std::move(tokens_);
  }

 private:
  size_t find_tag(size_t from) const {
    for (size_t i = from; i + 1 < src_.size(); ++i) {
      if (src_[i] == '{' && (src_[i + 1] == '{' || src_[i + 1] == '%' || src_[i + 1] == '#')) return i;
    }
    return src_.size();
  }

  // After "-%}" all whitespace goes; after a plain "%}" or "#}" one newline goes (trim_blocks).
  void after_tag_end(char modifier, bool block_like) {
    const size_t start = pos_;
    if (modifier == '-') {
      while (pos_ < src_.size() && is_space(src_[pos_])) ++pos_;
    } else if (modifier != '+' && block_like && pos_ < src_.size() && src_[pos_] == '\n') {
      ++pos_;
    }
    line_ += count_newlines(std::string_view(src_).substr(start, pos_ - start));
    line_starting_ = pos_ > start && src_[pos_ - 1] == '\n';
  }

  void lex_comment() {
    const int begin_line = line_;
    const size_t end = src_.find("#}", pos_);
    if (end == std::string::npos) fail("unclosed comment '{#'", begin_line);
    const char modifier = end > pos_ && (src_[end - 1] == '-' || src_[end - 1] == '+') ? src_[end - 1] : '\0';
    line_ += count_newlines(std::string_view(src_).substr(pos_, end + 2 - pos_));
    pos_ = end + 2;
    after_tag_end(modifier, true);
  }

  // {% raw %}...{% endraw %}: the content is text, tags in it included.
  bool try_raw() {
    size_t i = pos_;
    while (i < src_.size() && is_space(src_[i])) ++i;
    if (src_.compare(i, 3, "raw") != 0 || (i + 3 < src_.size() && is_name_char(src_[i + 3]))) return false;
    i += 3;
    while (i < src_.size() && is_space(src_[i])) ++i;
    char open_modifier = '\0';
    if (i < src_.size() && (src_[i] == '-' || src_[i] == '+')) open_modifier = src_[i++];
    if (src_.compare(i, 2, "%}") != 0) return false;
    line_ += count_newlines(std::string_view(src_).substr(pos_, i + 2 - pos_));
    pos_ = i + 2;
    if (open_modifier == '-') {
      while (pos_ < src_.size() && is_space(src_[pos_])) line_ += src_[pos_++] == '\n';
    }
    for (size_t search = pos_;;) {
      const size_t tag = src_.find("{%", search);
      if (tag == std::string::npos) fail("unclosed '{% raw %}' block", line_);
      size_t j = tag + 2;
      const char close_modifier = j < src_.size() && (src_[j] == '-' || src_[j] == '+') ? src_[j] : '\0';
      if (close_modifier != '\0') ++j;
      while (j < src_.size() && is_space(src_[j])) ++j;
      if (src_.compare(j, 6, "endraw") == 0) {
        j += 6;
        while (j < src_.size() && is_space(src_[j])) ++j;
        char end_modifier = '\0';
        if (j < src_.size() && (src_[j] == '-' || src_[j] == '+')) end_modifier = src_[j++];
        if (src_.compare(j, 2, "%}") == 0) {
          std::string content = src_.substr(pos_, tag - pos_);
          if (close_modifier == '-') rstrip(content);
          if (!content.empty()) tokens_.push_back({TokenType::Text, std::move(content), line_});
          line_ += count_newlines(std::string_view(src_).substr(pos_, j + 2 - pos_));
          pos_ = j + 2;
          after_tag_end(end_modifier, true);
          return true;
        }
      }
      search = tag + 2;
    }
  }

  void lex_tag(bool variable) {
    const int begin_line = line_;
    tokens_.push_back({variable ? TokenType::VarBegin : TokenType::BlockBegin, "", line_});
    int depth = 0;
    while (true) {
      while (pos_ < src_.size() && is_space(src_[pos_])) line_ += src_[pos_++] == '\n';
      if (pos_ >= src_.size()) fail(variable ? "unclosed '{{'" : "unclosed '{%'", begin_line);
      const char c = src_[pos_];
      const char next = pos_ + 1 < src_.size() ? src_[pos_ + 1] : '\0';
      const char after = pos_ + 2 < src_.size() ? src_[pos_ + 2] : '\0';
      const char close = variable ? '}' : '%';
      if (depth == 0) {
        if ((c == '-' || c == '+') && next == close && after == '}' && (variable ? c == '-' : true)) {
          tokens_.push_back({variable ? TokenType::VarEnd : TokenType::BlockEnd, "", line_});
          pos_ += 3;
          after_tag_end(c, !variable);
          return;
        }
        if (c == close && next == '}') {
          tokens_.push_back({variable ? TokenType::VarEnd : TokenType::BlockEnd, "", line_});
          pos_ += 2;
          after_tag_end('\0', !variable);
          return;
        }
      }
      if (is_name_start(c)) {
        const size_t start = pos_;
        while (pos_ < src_.size() && is_name_char(src_[pos_])) ++pos_;
        tokens_.push_back({TokenType::Name, src_.substr(start, pos_ - start), line_});
      } else if (is_digit(c)) {
        lex_number();
      } else if (c == '\'' || c == '"') {
        lex_string();
      } else {
        lex_operator(depth);
      }
    }
  }

  void lex_number() {
    const size_t start = pos_;
    const auto digits = [&] {
      while (pos_ < src_.size() && (is_digit(src_[pos_]) || (src_[pos_] == '_' && pos_ + 1 < src_.size() &&
                                                             is_digit(src_[pos_ + 1])))) {
        ++pos_;
      }
    };
    digits();
    bool is_float = false;
    if (pos_ + 1 < src_.size() && src_[pos_] == '.' && is_digit(src_[pos_ + 1])) {
      is_float = true;
      ++pos_;
      digits();
    }
    if (pos_ < src_.size() && (src_[pos_] == 'e' || src_[pos_] == 'E')) {
      size_t k = pos_ + 1;
      if (k < src_.size() && (src_[k] == '+' || src_[k] == '-')) ++k;
      if (k < src_.size() && is_digit(src_[k])) {
        is_float = true;
        pos_ = k;
        digits();
      }
    }
    std::string text = src_.substr(start, pos_ - start);
    text.erase(std::remove(text.begin(), text.end(), '_'), text.end());
    tokens_.push_back({is_float ? TokenType::Float : TokenType::Integer, std::move(text), line_});
  }

  void lex_string() {
    const int begin_line = line_;
    const char quote = src_[pos_++];
    std::string value;
    while (true) {
      if (pos_ >= src_.size()) fail("unterminated string", begin_line);
      const char c = src_[pos_++];
      if (c == quote) break;
      if (c == '\n') ++line_;
      if (c != '\\') {
        value += c;
        continue;
      }
      if (pos_ >= src_.size()) fail("unterminated string", begin_line);
      const char e = src_[pos_++];
      switch (e) {
        case 'n':
          value += '\n';
          break;
        case 't':
          value += '\t';
          break;
        case 'r':
          value += '\r';
          break;
        case '\\':
          value += '\\';
          break;
        case '\'':
          value += '\'';
          break;
        case '"':
          value += '"';
          break;
        case 'a':
          value += '\a';
          break;
        case 'b':
          value += '\b';
          break;
        case 'f':
          value += '\f';
          break;
        case 'v':
          value += '\v';
          break;
        case '\n':
          ++line_;
          break;  // a backslash-newline continues the line, as in Python
        case 'x':
          value += unicode_escape(2, begin_line);
          break;
        case 'u':
          value += unicode_escape(4, begin_line);
          break;
        case 'U':
          value += unicode_escape(8, begin_line);
          break;
        default:
          if (e >= '0' && e <= '7') {
            unsigned code = static_cast<unsigned>(e - '0');
            for (int k = 0; k < 2 && pos_ < src_.size() && src_[pos_] >= '0' && src_[pos_] <= '7'; ++k) {
              code = code * 8 + static_cast<unsigned>(src_[pos_++] - '0');
            }
            value += encode_utf8(code);
          } else if (e == 'N') {
            fail("unsupported string escape '\\N{...}'", line_);
          } else {
            // Python keeps unknown escapes as written.
            value += '\\';
            value += e;
            if (e == '\n') ++line_;
          }
      }
    }
    tokens_.push_back({TokenType::String, std::move(value), begin_line});
  }

  std::string unicode_escape(int length, int line) {
    unsigned code = 0;
    for (int k = 0; k < length; ++k) {
      if (pos_ >= src_.size() || !std::isxdigit(static_cast<unsigned char>(src_[pos_]))) {
        fail("malformed \\x, \\u or \\U escape in a string", line);
      }
      const char h = src_[pos_++];
      code = code * 16 + static_cast<unsigned>(is_digit(h) ? h - '0' : std::tolower(h) - 'a' + 10);
    }
    if (code > 0x10FFFF) fail("string escape beyond U+10FFFF", line);
    return encode_utf8(code);
  }

  static std::string encode_utf8(unsigned code) {
    std::string out;
    if (code < 0x80) {
      out += static_cast<char>(code);
    } else if (code < 0x800) {
      out += static_cast<char>(0xC0 | (code >> 6));
      out += static_cast<char>(0x80 | (code & 0x3F));
    } else if (code < 0x10000) {
      out += static_cast<char>(0xE0 | (code >> 12));
      out += static_cast<char>(0x80 | ((code >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (code & 0x3F));
    } else {
      out += static_cast<char>(0xF0 | (code >> 18));
      out += static_cast<char>(0x80 | ((code >> 12) & 0x3F));
      out += static_cast<char>(0x80 | ((code >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (code & 0x3F));
    }
    return out;
  }

  void lex_operator(int& depth) {
    static const char* const kTwoChar[] = {"//", "**", "==", "!=", "<=", ">="};
    for (const char* op : kTwoChar) {
      if (src_.compare(pos_, 2, op) == 0) {
        tokens_.push_back({TokenType::Operator, op, line_});
        pos_ += 2;
        return;
      }
    }
    const char c = src_[pos_];
    static const std::string kSingle = "+-/*%~|.,:()[]{}<>=";
    if (kSingle.find(c) == std::string::npos) {
      const auto byte = static_cast<unsigned char>(c);
      fail(byte >= 0x20 && byte < 0x7f ? std::string("unexpected character '") + c + "'"
                                       : "unexpected byte " + std::to_string(byte),
           line_);
    }
    if (c == '(' || c == '[' || c == '{') ++depth;
    if ((c == ')' || c == ']' || c == '}') && depth > 0) --depth;
    tokens_.push_back({TokenType::Operator, std::string(1, c), line_});
    ++pos_;
  }

  std::string src_;
  size_t pos_ = 0;
  int line_ = 1;
  bool line_starting_ = true;
  std::vector<Token> tokens_;
};

}  // namespace

std::vector<Token> tokenize(std::string_view source) {
  return Lexer(source).run();
}

}  // namespace mb::chat

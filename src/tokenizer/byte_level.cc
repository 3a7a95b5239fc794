// SPDX-License-Identifier: MIT
#include "tokenizer/byte_level.h"

#include <array>
#include <cstdint>

#include "tokenizer/utf8.h"

namespace mb::tok {

namespace {

constexpr char32_t kFirstShiftedChar = 256;
constexpr char32_t kCharTableSize = kFirstShiftedChar + 68;

bool is_self_mapped(unsigned b) {
  return (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174);
}

struct Tables {
  std::array<char32_t, 256> byte_chars{};
  std::array<std::string, 256> byte_utf8;
  std::array<int16_t, kCharTableSize> char_bytes{};

  Tables() {
    char_bytes.fill(-1);
    char32_t next = kFirstShiftedChar;
    for (unsigned b = 0; b < 256; ++b) {
      const char32_t c = is_self_mapped(b) ? b : next++;
      byte_chars[b] = c;
      append_utf8(byte_utf8[b], c);
      char_bytes[c] = static_cast<int16_t>(b);
    }
  }
};

const Tables& tables() {
  static const Tables instance;
  return instance;
}

}  // namespace

char32_t byte_to_char(unsigned char byte) {
  return tables().byte_chars[byte];
}

void append_byte_level(std::string& out, std::string_view bytes) {
  const Tables& t = tables();
  for (char c : bytes) out += t.byte_utf8[static_cast<unsigned char>(c)];
}

void append_byte_level_decoded(std::string& out, std::string_view token) {
  const Tables& t = tables();
  const size_t start = out.size();
  size_t pos = 0;
  while (pos < token.size()) {
    const char32_t c = next_code_point(token, pos);
    if (c >= kCharTableSize || t.char_bytes[c] < 0) {
      out.resize(start);
      out.append(token);
      return;
    }
    out.push_back(static_cast<char>(t.char_bytes[c]));
  }
}

}  // namespace mb::tok

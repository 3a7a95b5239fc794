// SPDX-License-Identifier: MIT
#include "tokenizer/utf8.h"

#include <cstdint>

namespace mb::tok {

namespace {

struct SequenceCheck {
  size_t length;    // bytes that form a complete valid sequence, or the ill-formed prefix length
  bool valid;       // a complete, well-formed sequence starts here
  bool incomplete;  // the bytes ran out while the sequence was still well-formed so far
};

// Validates one sequence against the Unicode table of well-formed byte sequences (Table 3-7),
// which rules out overlong forms, surrogates and code points above U+10FFFF by narrowing the
// range of the second byte.
SequenceCheck check_sequence(std::string_view bytes, size_t pos) {
  const auto byte = [&](size_t i) { return static_cast<uint8_t>(bytes[i]); };
  const uint8_t lead = byte(pos);
  if (lead < 0x80) return {1, true, false};
  size_t needed;
  uint8_t second_low = 0x80;
  uint8_t second_high = 0xBF;
  if (lead >= 0xC2 && lead <= 0xDF) {
    needed = 1;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    needed = 2;
    if (lead == 0xE0) second_low = 0xA0;
    if (lead == 0xED) second_high = 0x9F;
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    needed = 3;
    if (lead == 0xF0) second_low = 0x90;
    if (lead == 0xF4) second_high = 0x8F;
  } else {
    return {1, false, false};
  }
  for (size_t k = 1; k <= needed; ++k) {
    if (pos + k >= bytes.size()) return {k, false, true};
    const uint8_t next = byte(pos + k);
    const uint8_t low = k == 1 ? second_low : 0x80;
    const uint8_t high = k == 1 ? second_high : 0xBF;
    if (next < low || next > high) return {k, false, false};
  }
  return {needed + 1, true, false};
}

}  // namespace

void append_utf8(std::string& out, char32_t code_point) {
  if (code_point < 0x80) {
    out.push_back(static_cast<char>(code_point));
  } else if (code_point < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (code_point >> 6)));
    out.push_back(static_cast<char>(0x80 | (code_point & 0x3F)));
  } else if (code_point < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (code_point >> 12)));
    out.push_back(static_cast<char>(0x80 | ((code_point >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (code_point & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (code_point >> 18)));
    out.push_back(static_cast<char>(0x80 | ((code_point >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((code_point >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (code_point & 0x3F)));
  }
}

char32_t next_code_point(std::string_view valid_text, size_t& pos) {
  const auto byte = [&](size_t i) { return static_cast<char32_t>(static_cast<uint8_t>(valid_text[i])); };
  const char32_t lead = byte(pos);
  if (lead < 0x80) {
    pos += 1;
    return lead;
  }
  if (lead < 0xE0) {
    const char32_t cp = ((lead & 0x1F) << 6) | (byte(pos + 1) & 0x3F);
    pos += 2;
    return cp;
  }
  if (lead < 0xF0) {
    const char32_t cp = ((lead & 0x0F) << 12) | ((byte(pos + 1) & 0x3F) << 6) | (byte(pos + 2) & 0x3F);
    pos += 3;
    return cp;
  }
  const char32_t cp = ((lead & 0x07) << 18) | ((byte(pos + 1) & 0x3F) << 12) | ((byte(pos + 2) & 0x3F) << 6) |
                      (byte(pos + 3) & 0x3F);
  pos += 4;
  return cp;
}

size_t invalid_utf8_offset(std::string_view bytes) {
  size_t pos = 0;
  while (pos < bytes.size()) {
    if (static_cast<uint8_t>(bytes[pos]) < 0x80) {
      ++pos;
      continue;
    }
    const SequenceCheck check = check_sequence(bytes, pos);
    if (!check.valid) return pos;
    pos += check.length;
  }
  return std::string_view::npos;
}

bool is_valid_utf8(std::string_view bytes) {
  return invalid_utf8_offset(bytes) == std::string_view::npos;
}

size_t append_lossy_utf8(std::string& out, std::string_view bytes, bool final) {
  size_t pos = 0;
  while (pos < bytes.size()) {
    const SequenceCheck check = check_sequence(bytes, pos);
    if (check.valid) {
      out.append(bytes.substr(pos, check.length));
    } else if (check.incomplete && !final) {
      return pos;
    } else {
      append_utf8(out, kReplacementChar);
    }
    pos += check.length;
  }
  return pos;
}

std::string to_valid_utf8(std::string_view bytes) {
  if (is_valid_utf8(bytes)) return std::string(bytes);
  std::string out;
  out.reserve(bytes.size() + 8);
  append_lossy_utf8(out, bytes, true);
  return out;
}

}  // namespace mb::tok

// SPDX-License-Identifier: MIT
// UTF-8 helpers shared by the tokenizer: encoding code points, walking valid text and the
// lossy conversion that turns arbitrary bytes into valid UTF-8 exactly like Rust's
// String::from_utf8_lossy (which is what Hugging Face tokenizers applies when decoding).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace mb::tok {

inline constexpr char32_t kReplacementChar = 0xFFFD;

void append_utf8(std::string& out, char32_t code_point);

// Decodes the code point starting at `pos` of text that is known to be valid UTF-8 and
// advances `pos` past it.
char32_t next_code_point(std::string_view valid_text, size_t& pos);

bool is_valid_utf8(std::string_view bytes);
// The offset of the first byte that does not start a well-formed sequence, or npos when `bytes` is
// valid UTF-8 (for error messages that point at the byte).
size_t invalid_utf8_offset(std::string_view bytes);

// Appends `bytes` to `out` with every maximal ill-formed subsequence replaced by one U+FFFD
// (the Unicode "substitution of maximal subparts" practice that Rust, WHATWG and Python
// follow). When `final` is false, an incomplete but so far valid sequence at the very end is
// left unconsumed so that a streaming caller can complete it with later bytes. Returns how
// many bytes were consumed.
size_t append_lossy_utf8(std::string& out, std::string_view bytes, bool final = true);

// Returns `bytes` unchanged when it is valid UTF-8, and its lossy conversion otherwise.
std::string to_valid_utf8(std::string_view bytes);

}  // namespace mb::tok

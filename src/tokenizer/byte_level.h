// SPDX-License-Identifier: MIT
// GPT-2's reversible byte-to-unicode table, used by ByteLevel pre-tokenizers and decoders.
//
// Printable bytes (33-126, 161-172, 174-255) stand for themselves; the other 68 bytes map to
// U+0100 onwards in increasing byte order, so every byte becomes a visible character (space is
// U+0120 'Ġ', newline U+010A 'Ċ') and any text becomes a string over a 256-symbol alphabet.
#pragma once

#include <string>
#include <string_view>

namespace mb::tok {

char32_t byte_to_char(unsigned char byte);

// Appends the byte-level form of `bytes`: every byte replaced by its character.
void append_byte_level(std::string& out, std::string_view bytes);

// Appends what the ByteLevel decoder produces for one token: each character mapped back to its
// byte or, when any character lies outside the table (added tokens such as runs of plain
// spaces), the token's own UTF-8 bytes.
void append_byte_level_decoded(std::string& out, std::string_view token);

}  // namespace mb::tok

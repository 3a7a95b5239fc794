// SPDX-License-Identifier: MIT
// Unicode character classes and normalization forms, backed by utf8proc.
//
// The classes follow the semantics of the regex engines Hugging Face tokenizers uses
// (Oniguruma and the Rust regex crate): \p{L} and \p{N} are the general categories L* and N*,
// and \s is the White_Space property (which excludes U+FEFF and U+200B).
#pragma once

#include <string>
#include <string_view>

namespace mb::tok {

bool is_letter(char32_t code_point);
bool is_number(char32_t code_point);
bool is_white_space(char32_t code_point);
// The Rust regex crate's \w: letters, marks, decimal and letter numbers, connector punctuation
// and the joiners (Other_Alphabetic symbols such as circled letters are not included).
bool is_word_char(char32_t code_point);

enum class NormalForm { NFC, NFD, NFKC, NFKD };

// Normalizes text that is known to be valid UTF-8.
std::string normalize(std::string_view valid_text, NormalForm form);

}  // namespace mb::tok

// SPDX-License-Identifier: MIT
// Reading the fields of tokenizer.json pipeline stages (normalizer, pre_tokenizer, decoder).
// Every helper throws mb::Error naming `source`, the stage and the field when the field is
// missing or has the wrong type.
#pragma once

#include <nlohmann/json_fwd.hpp>
#include <string>

namespace mb::tok {

// The stage's "type" string; the stage must be an object.
std::string stage_type(const nlohmann::json& config, const std::string& source, const char* stage);

bool bool_field(const nlohmann::json& config, const char* key, bool fallback, const std::string& source,
                const char* stage);
// The array under `key` of a Sequence.
const nlohmann::json& array_field(const nlohmann::json& config, const char* key, const std::string& source,
                                  const char* stage);
std::string string_field(const nlohmann::json& config, const char* key, const std::string& source,
                         const char* stage);
// A string holding exactly one character, as Rust's `char` fields are written.
char32_t char_field(const nlohmann::json& config, const char* key, const std::string& source,
                    const char* stage);
// A non-negative integer.
size_t count_field(const nlohmann::json& config, const char* key, const std::string& source,
                   const char* stage);

// The literal of a {"String": "..."} pattern, as Replace stages write it. Regex patterns and
// empty strings are refused.
std::string string_pattern(const nlohmann::json& config, const std::string& source, const char* stage);

enum class PrependScheme { Always, First, Never };

struct MetaspaceOptions {
  char32_t replacement = U'\u2581';
  PrependScheme prepend = PrependScheme::Always;
  bool split = true;
};

// The fields of a Metaspace pre-tokenizer or decoder: "replacement", "prepend_scheme" (always
// when absent) and "split" (true when absent), or in older files "add_prefix_space", which
// must agree with prepend_scheme as Hugging Face requires (false means never).
MetaspaceOptions metaspace_options(const nlohmann::json& config, const std::string& source,
                                   const char* stage);

}  // namespace mb::tok

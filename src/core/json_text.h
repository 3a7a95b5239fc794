// SPDX-License-Identifier: MIT
// Parsing JSON that comes from files (config.json, tokenizer.json, safetensors headers and
// indexes), which are untrusted input like every other byte of a checkpoint folder.
#pragma once

#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace mb {

// Sees each object key as it is read: `depth` is the number of open arrays and objects, so the
// outermost object's keys have depth 1. It may throw mb::Error to refuse the text.
using JsonKeyObserver = std::function<void(int depth, const std::string& key)>;

// Parses `text` in time linear in its length. Every failure throws mb::Error "<source> is not
// valid JSON (<detail>)": syntax errors, numbers outside double's range such as 1e400, invalid
// UTF-8, and nesting deeper than `max_depth` arrays and objects. The depth is refused while
// parsing because nlohmann's copy, comparison and dump() recurse once per level, so a deeply
// nested value would overflow the stack long after it was read. A repeated key keeps its last
// value, as with json::parse; `on_key` is for callers that must refuse repeats. A text with more
// than `max_containers` arrays and objects is refused as soon as the parser reaches the one past
// the limit ("<source> holds more than N arrays and objects"): each costs about a hundred bytes
// parsed, twenty times its text, so the limit bounds the memory a text can claim.
nlohmann::json parse_json_text(std::string_view text, const std::string& source, int max_depth,
                               const JsonKeyObserver& on_key = nullptr, size_t max_containers = SIZE_MAX);

// A bounded description of `value` for error messages: its JSON text, cut to about 60 bytes
// (on a UTF-8 character boundary) with "..." appended when longer, so a message never carries
// a whole megabyte array.
std::string json_excerpt(const nlohmann::json& value);

}  // namespace mb

// Parsing JSON that comes from files (config.json, tokenizer.json, safetensors headers and
// indexes), which are untrusted input like every other byte of a checkpoint folder.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace mb {

// Parses `text`. Every failure throws mb::Error "<source> is not valid JSON (<detail>)": syntax
// errors, numbers outside double's range such as 1e400 (which nlohmann reports as an
// out_of_range exception rather than a parse_error), invalid UTF-8, and nesting deeper than
// `max_depth` arrays and objects. The depth is refused while parsing because nlohmann's copy,
// comparison and dump() recurse once per level, so a deeply nested value would overflow the
// stack long after it was read. `callback`, when given, sees every event as with json::parse
// and may throw mb::Error itself.
nlohmann::json parse_json_text(std::string_view text, const std::string& source, int max_depth,
                               const nlohmann::json::parser_callback_t& callback = nullptr);

// A bounded description of `value` for error messages: its JSON text, cut to about 60 bytes
// (on a UTF-8 character boundary) with "..." appended when longer, so a message never carries
// a whole megabyte array.
std::string json_excerpt(const nlohmann::json& value);

}  // namespace mb

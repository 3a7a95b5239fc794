#include "core/json_text.h"

#include "core/error.h"

namespace mb {

using nlohmann::json;

json parse_json_text(std::string_view text, const std::string& source, int max_depth,
                     const json::parser_callback_t& callback) {
  // The depth passed to the callback at object_start / array_start is the number of enclosing
  // containers, so the outermost value has depth 0.
  const auto bounded = [&](int depth, json::parse_event_t event, json& parsed) {
    const bool opens =
        event == json::parse_event_t::object_start || event == json::parse_event_t::array_start;
    if (opens && depth >= max_depth)
      throw Error(source + " is not valid JSON (arrays and objects nest deeper than " +
                  std::to_string(max_depth) + " levels)");
    return callback ? callback(depth, event, parsed) : true;
  };
  try {
    return json::parse(text, bounded);
  } catch (const json::exception& e) {
    throw Error(source + " is not valid JSON (" + e.what() + ")");
  }
}

std::string json_excerpt(const json& value) {
  constexpr size_t kMaxBytes = 60;
  std::string text = value.dump(-1, ' ', false, json::error_handler_t::replace);
  if (text.size() <= kMaxBytes) return text;
  size_t cut = kMaxBytes;
  // Back up over UTF-8 continuation bytes so the excerpt stays valid UTF-8.
  while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) --cut;
  text.resize(cut);
  return text + "...";
}

}  // namespace mb

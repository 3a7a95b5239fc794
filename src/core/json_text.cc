// SPDX-License-Identifier: MIT
#include "core/json_text.h"

#include <utility>
#include <vector>

#include "core/error.h"

namespace mb {

using nlohmann::json;

namespace {

// The message of a text that does not parse. nlohmann's detail quotes the bytes it last read, which
// may be the invalid UTF-8 itself: those are spelled \xNN, so the message is valid UTF-8 wherever it
// goes (a JSON error body, a Python exception). Strings that are not UTF-8 (a raw byte, or an
// escaped lone surrogate) are named as such: the client wrote text, not JSON, in the common case.
std::string not_valid_json(const std::string& source, const char* detail) {
  std::string safe;
  for (const char* p = detail; *p != '\0'; ++p) {
    const auto byte = static_cast<unsigned char>(*p);
    if (byte < 0x80) {
      safe += *p;
      continue;
    }
    static constexpr char kHex[] = "0123456789abcdef";
    safe += {'\\', 'x', kHex[byte >> 4], kHex[byte & 15]};
  }
  const bool utf8 = safe.find("UTF-8") != std::string::npos || safe.find("surrogate") != std::string::npos;
  return source + " is not valid JSON (" + (utf8 ? "a string is not valid UTF-8: " : "") + safe + ")";
}

// Builds the parsed value from nlohmann's SAX events while refusing nesting past `max_depth`.
// nlohmann's json::parse with a parser callback rescans the enclosing container at the end of
// every object (to drop values the callback discarded), so its time grows with the square of
// the number of objects in an array; this builder keeps a stack of the open containers and
// touches each value once, so parsing is linear in the text.
class BoundedBuilder {
 public:
  using string_t = json::string_t;
  using binary_t = json::binary_t;

  BoundedBuilder(json& root, const std::string& source, int max_depth, size_t max_containers,
                 const JsonKeyObserver& on_key)
      : root_(root),
        source_(source),
        max_depth_(max_depth),
        max_containers_(max_containers),
        containers_left_(max_containers),
        on_key_(on_key) {}

  bool null() { return add(nullptr); }
  bool boolean(bool value) { return add(value); }
  bool number_integer(json::number_integer_t value) { return add(value); }
  bool number_unsigned(json::number_unsigned_t value) { return add(value); }
  bool number_float(json::number_float_t value, const string_t&) { return add(value); }
  bool string(string_t& value) { return add(std::move(value)); }
  bool binary(binary_t& value) { return add(json::binary(std::move(value))); }

  bool start_object(std::size_t) { return open(json::value_t::object); }
  bool start_array(std::size_t) { return open(json::value_t::array); }
  bool end_object() { return close(); }
  bool end_array() { return close(); }

  bool key(string_t& key) {
    // The depth a key is reported at is the number of open containers, so the outermost
    // object's keys have depth 1, as with nlohmann's parser callback.
    if (on_key_) on_key_(static_cast<int>(open_.size()), key);
    // Like nlohmann's own parser, a repeated key replaces the earlier value.
    pending_ = &(*open_.back())[std::move(key)];
    return true;
  }

  [[noreturn]] bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception& e) {
    // Syntax errors, invalid UTF-8 and numbers outside double's range such as 1e400 (an
    // out_of_range exception rather than a parse_error) all arrive here.
    throw Error(not_valid_json(source_, e.what()));
  }

 private:
  // Places `value` where the text puts it and returns its address in the tree.
  json* place(json&& value) {
    if (open_.empty()) {
      root_ = std::move(value);
      return &root_;
    }
    json& parent = *open_.back();
    if (parent.is_array()) return &parent.emplace_back(std::move(value));
    *pending_ = std::move(value);
    return pending_;
  }

  bool add(json&& value) {
    place(std::move(value));
    return true;
  }

  bool open(json::value_t type) {
    // The outermost value has depth 0: the depth is the number of enclosing containers.
    if (open_.size() >= static_cast<size_t>(max_depth_))
      throw Error(source_ + " is not valid JSON (arrays and objects nest deeper than " +
                  std::to_string(max_depth_) + " levels)");
    if (containers_left_ == 0)
      throw Error(source_ + " holds more than " + std::to_string(max_containers_) + " arrays and objects");
    --containers_left_;
    open_.push_back(place(json(type)));
    return true;
  }

  bool close() {
    open_.pop_back();
    return true;
  }

  json& root_;
  const std::string& source_;
  const int max_depth_;
  const size_t max_containers_;
  size_t containers_left_;  // arrays and objects the text may still open
  const JsonKeyObserver& on_key_;
  // The containers opened and not yet closed, innermost last. Their addresses stay valid while
  // they are open: only the innermost one grows.
  std::vector<json*> open_;
  json* pending_ = nullptr;  // the value slot of the last key read in the innermost object
};

}  // namespace

json parse_json_text(std::string_view text, const std::string& source, int max_depth,
                     const JsonKeyObserver& on_key, size_t max_containers) {
  json root;
  BoundedBuilder builder(root, source, max_depth, max_containers, on_key);
  try {
    json::sax_parse(text, &builder);
  } catch (const json::exception& e) {
    throw Error(not_valid_json(source, e.what()));
  }
  return root;
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

// SPDX-License-Identifier: MIT
// JSON in and out of template values. Out: tojson as transformers overrides it, Python's
// json.dumps(value, ensure_ascii=False, indent=indent, separators=separators, sort_keys=sort_keys),
// not Jinja's HTML-safe version. In: the variables render_json takes, read as Python's json.loads
// reads them.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <nlohmann/json.hpp>
#include <utility>

#include "chat/jinja_eval.h"
#include "core/error.h"

namespace mb::chat {

namespace {

struct JsonStyle {
  bool indented = false;
  std::string indent;
  std::string item_separator = ", ";
  std::string key_separator = ": ";
  bool sort_keys = false;
  bool ensure_ascii = false;
};

class JsonWriter {
 public:
  JsonWriter(const JsonStyle& style, Budget& budget, int line)
      : style_(style), budget_(budget), line_(line) {}

  void write(const Value& value, int level) {
    if (value.is_none()) return put("null");
    if (value.is_bool()) return put(value.as_bool() ? "true" : "false");
    if (value.is_int()) return put(std::to_string(value.as_int()));
    if (value.is_float()) {
      const double d = value.as_float();
      if (d != d) return put("NaN");
      if (d == std::numeric_limits<double>::infinity()) return put("Infinity");
      if (d == -std::numeric_limits<double>::infinity()) return put("-Infinity");
      return put(float_repr(d));
    }
    if (value.is_string()) return write_string(value.str());
    if (value.is_list()) {
      const auto& items = value.items();
      if (items.empty()) return put("[]");
      put("[");
      for (size_t i = 0; i < items.size(); ++i) {
        if (i > 0) put(style_.item_separator);
        newline(level + 1);
        write(items[i], level + 1);
      }
      newline(level);
      return put("]");
    }
    if (value.is_dict()) {
      std::vector<const std::pair<std::string, Value>*> entries;
      for (const auto& entry : value.dict_data().entries) entries.push_back(&entry);
      if (entries.empty()) return put("{}");
      if (style_.sort_keys) {
        std::stable_sort(entries.begin(), entries.end(),
                         [](const auto* a, const auto* b) { return a->first < b->first; });
      }
      put("{");
      for (size_t i = 0; i < entries.size(); ++i) {
        if (i > 0) put(style_.item_separator);
        newline(level + 1);
        write_string(entries[i]->first);
        put(style_.key_separator);
        write(entries[i]->second, level + 1);
      }
      newline(level);
      return put("}");
    }
    const char* type = value.is_undefined() ? "Undefined" : value.type_name();
    fail_at(std::string("Object of type ") + type + " is not JSON serializable", line_);
  }

  std::string take() { return std::move(out_); }

 private:
  void put(std::string_view text) {
    if (text.size() > budget_.max_string_bytes() || out_.size() > budget_.max_string_bytes() - text.size()) {
      fail_at("tojson output grows past the output limit", line_);
    }
    out_ += text;
  }

  void newline(int level) {
    if (!style_.indented) return;
    put("\n");
    for (int i = 0; i < level; ++i) put(style_.indent);
  }

  void write_string(const std::string& s) {
    std::string quoted = "\"";
    for (std::string_view c : code_points(s)) {
      if (c.size() == 1) {
        const auto byte = static_cast<unsigned char>(c[0]);
        switch (byte) {
          case '"':
            quoted += "\\\"";
            continue;
          case '\\':
            quoted += "\\\\";
            continue;
          case '\n':
            quoted += "\\n";
            continue;
          case '\r':
            quoted += "\\r";
            continue;
          case '\t':
            quoted += "\\t";
            continue;
          case '\b':
            quoted += "\\b";
            continue;
          case '\f':
            quoted += "\\f";
            continue;
          default:
            break;
        }
        if (byte < 0x20 || (style_.ensure_ascii && byte >= 0x80)) {
          char escape[8];
          std::snprintf(escape, sizeof escape, "\\u%04x", byte);
          quoted += escape;
          continue;
        }
        quoted += c;
        continue;
      }
      if (!style_.ensure_ascii) {
        quoted += c;
        continue;
      }
      // ensure_ascii: \uXXXX, as a surrogate pair beyond the Basic Multilingual Plane.
      unsigned code = static_cast<unsigned char>(c[0]) & (c.size() == 2 ? 0x1F : c.size() == 3 ? 0x0F : 0x07);
      for (size_t k = 1; k < c.size(); ++k) code = (code << 6) | (static_cast<unsigned char>(c[k]) & 0x3F);
      char escape[16];
      if (code >= 0x10000) {
        code -= 0x10000;
        std::snprintf(escape, sizeof escape, "\\u%04x\\u%04x", 0xD800 + (code >> 10),
                      0xDC00 + (code & 0x3FF));
      } else {
        std::snprintf(escape, sizeof escape, "\\u%04x", code);
      }
      quoted += escape;
    }
    quoted += '"';
    put(quoted);
  }

  const JsonStyle& style_;
  Budget& budget_;
  int line_;
  std::string out_;
};

// Builds template values from nlohmann's SAX events, one value at a time, with a stack of the
// open containers: linear in the text (nlohmann's ordered_json would look up each key in a
// vector), objects in their key order with a repeated key keeping its first position and last
// value (DictData::set, as Python's dict), integers apart from floats, and the nesting and the
// number of containers refused past their bounds while reading.
class ValueBuilder {
 public:
  using string_t = nlohmann::json::string_t;
  using binary_t = nlohmann::json::binary_t;

  explicit ValueBuilder(const std::string& source) : source_(source) {}

  bool null() { return add(Value::none()); }
  bool boolean(bool value) { return add(Value::boolean(value)); }
  bool number_integer(nlohmann::json::number_integer_t value) { return add(Value::integer(value)); }
  bool number_unsigned(nlohmann::json::number_unsigned_t value) {
    if (value > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
      throw Error(source_ + ": the integer " + std::to_string(value) + " is out of range");
    return add(Value::integer(static_cast<int64_t>(value)));
  }
  bool number_float(nlohmann::json::number_float_t value, const string_t&) {
    return add(Value::floating(value));
  }
  bool string(string_t& value) { return add(Value::string(std::move(value))); }
  bool binary(binary_t&) { throw Error(source_ + " is not valid JSON (binary value)"); }

  bool start_object(std::size_t) { return open(true); }
  bool start_array(std::size_t) { return open(false); }
  bool key(string_t& key) {
    open_.back().key = std::move(key);
    return true;
  }
  bool end_object() {
    Frame frame = std::move(open_.back());
    open_.pop_back();
    return add(Value::dict(std::move(frame.entries)));
  }
  bool end_array() {
    Frame frame = std::move(open_.back());
    open_.pop_back();
    return add(Value::list(std::move(frame.items)));
  }

  [[noreturn]] bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception& e) {
    throw Error(source_ + " is not valid JSON (" + e.what() + ")");
  }

  Value take() { return std::move(root_); }

 private:
  struct Frame {
    bool object = false;
    std::vector<Value> items;
    DictData entries;
    std::string key;  // the object's key read last
  };

  bool add(Value value) {
    if (open_.empty()) {
      root_ = std::move(value);
    } else if (open_.back().object) {
      open_.back().entries.set(std::move(open_.back().key), std::move(value));
    } else {
      open_.back().items.push_back(std::move(value));
    }
    return true;
  }

  bool open(bool object) {
    if (open_.size() >= static_cast<size_t>(kMaxValueDepth))
      throw Error(source_ + " nests arrays and objects deeper than " + std::to_string(kMaxValueDepth) +
                  " levels");
    if (++containers_ > kMaxContainers)
      throw Error(source_ + " holds more than " + std::to_string(kMaxContainers) + " arrays and objects");
    open_.emplace_back().object = object;
    return true;
  }

  // Each container costs a hundred bytes or so for its two or three bytes of text.
  static constexpr size_t kMaxContainers = size_t{1} << 20;
  const std::string& source_;
  std::vector<Frame> open_;
  size_t containers_ = 0;
  Value root_;
};

}  // namespace

Value parse_json_value(std::string_view text, const std::string& source) {
  ValueBuilder builder(source);
  try {
    nlohmann::json::sax_parse(text, &builder);
  } catch (const nlohmann::json::exception& e) {
    throw Error(source + " is not valid JSON (" + e.what() + ")");
  }
  return builder.take();
}

std::string to_json(const Value& value, const CallArgs& args, Budget& budget) {
  args.check("tojson", 1, {"indent", "separators", "sort_keys", "ensure_ascii"});
  JsonStyle style;
  const Value* indent = args.get(0, "indent");
  if (indent != nullptr && !indent->is_none()) {
    style.indented = true;
    style.item_separator.assign(1, ',');  // json.dumps drops the space after commas when indenting
    if (indent->is_string()) {
      style.indent = indent->str();
    } else if (indent->is_int()) {
      style.indent.assign(static_cast<size_t>(std::clamp<int64_t>(indent->as_int(), 0, 256)), ' ');
    } else {
      fail_at("tojson indent must be an integer or a string", args.line);
    }
  }
  if (const Value* separators = args.get(SIZE_MAX, "separators"); separators && !separators->is_none()) {
    if (!separators->is_list() || separators->items().size() != 2 || !separators->items()[0].is_string() ||
        !separators->items()[1].is_string()) {
      fail_at("tojson separators must be a pair of strings", args.line);
    }
    style.item_separator = separators->items()[0].str();
    style.key_separator = separators->items()[1].str();
  }
  if (const Value* sort_keys = args.get(SIZE_MAX, "sort_keys")) style.sort_keys = truthy(*sort_keys);
  if (const Value* ensure_ascii = args.get(SIZE_MAX, "ensure_ascii"))
    style.ensure_ascii = truthy(*ensure_ascii);
  JsonWriter writer(style, budget, args.line);
  writer.write(value, 0);
  return writer.take();
}

}  // namespace mb::chat

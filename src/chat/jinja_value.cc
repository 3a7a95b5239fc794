// SPDX-License-Identifier: MIT
#include "chat/jinja_value.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>

#include "core/error.h"

namespace mb::chat {

namespace {

int child_depth(const Value& value) {
  return value.depth();
}

void check_depth(int depth) {
  if (depth > kMaxValueDepth) {
    throw Error("chat template: lists and mappings nest deeper than " + std::to_string(kMaxValueDepth) +
                " levels");
  }
}

}  // namespace

Value Value::undefined(std::string hint) {
  Value value;
  value.v = Undefined{std::make_shared<const std::string>(std::move(hint))};
  return value;
}

Value Value::string(std::string s) {
  return Value(Storage(std::make_shared<const std::string>(std::move(s))));
}

Value Value::list(std::vector<Value> items) {
  auto data = std::make_shared<ListData>();
  int deepest = 0;
  for (const Value& item : items) deepest = std::max(deepest, child_depth(item));
  data->depth = deepest + 1;
  check_depth(data->depth);
  data->items = std::move(items);
  return Value(Storage(std::shared_ptr<const ListData>(std::move(data))));
}

Value Value::dict(DictData data) {
  int deepest = 0;
  for (const auto& entry : data.entries) deepest = std::max(deepest, child_depth(entry.second));
  data.depth = deepest + 1;
  check_depth(data.depth);
  return Value(Storage(std::shared_ptr<const DictData>(std::make_shared<DictData>(std::move(data)))));
}

const std::vector<Value>& Value::items() const {
  return list_data().items;
}

const std::string& Value::undefined_hint() const {
  static const std::string empty;
  const auto& hint = std::get<Undefined>(v).hint;
  return hint ? *hint : empty;
}

int Value::depth() const {
  if (is_list()) return list_data().depth;
  if (is_dict()) return dict_data().depth;
  if (is_namespace()) return namespace_data().attributes.depth;
  return 0;
}

const char* Value::type_name() const {
  if (is_undefined()) return "undefined";
  if (is_none()) return "NoneType";
  if (is_bool()) return "bool";
  if (is_int()) return "int";
  if (is_float()) return "float";
  if (is_string()) return "str";
  if (is_list()) return "list";
  if (is_dict()) return "dict";
  if (is_namespace()) return "Namespace";
  return "function";
}

const Value* DictData::find(std::string_view key) const {
  const auto it = index.find(std::string(key));
  return it == index.end() ? nullptr : &entries[it->second].second;
}

void DictData::set(std::string key, Value value) {
  const auto it = index.find(key);
  if (it != index.end()) {
    entries[it->second].second = std::move(value);
    return;
  }
  index.emplace(key, entries.size());
  entries.emplace_back(std::move(key), std::move(value));
}

bool truthy(const Value& value) {
  if (value.is_undefined() || value.is_none()) return false;
  if (value.is_bool()) return value.as_bool();
  if (value.is_int()) return value.as_int() != 0;
  if (value.is_float()) return value.as_float() != 0.0;
  if (value.is_string()) return !value.str().empty();
  if (value.is_list()) return !value.items().empty();
  if (value.is_dict()) return !value.dict_data().entries.empty();
  return true;
}

std::string float_repr(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d < 0 ? "-inf" : "inf";
  // The shortest digits that round-trip, as Python's repr uses; only the layout differs from
  // to_chars: Python writes positional notation for decimal exponents -4 <= e < 16.
  char buffer[64];
  const auto result = std::to_chars(buffer, buffer + sizeof buffer, d, std::chars_format::scientific);
  std::string sci(buffer, result.ptr);
  std::string sign;
  if (sci[0] == '-') {
    sign = "-";
    sci.erase(0, 1);
  }
  const size_t e_pos = sci.find('e');
  std::string digits = sci.substr(0, e_pos);
  digits.erase(std::remove(digits.begin(), digits.end(), '.'), digits.end());
  const int exponent = std::stoi(sci.substr(e_pos + 1));
  if (exponent >= -4 && exponent < 16) {
    std::string out;
    if (exponent < 0) {
      out = "0." + std::string(static_cast<size_t>(-exponent - 1), '0') + digits;
    } else if (static_cast<int>(digits.size()) <= exponent + 1) {
      out = digits + std::string(static_cast<size_t>(exponent + 1 - static_cast<int>(digits.size())), '0') +
            ".0";
    } else {
      out = digits.substr(0, static_cast<size_t>(exponent + 1)) + "." +
            digits.substr(static_cast<size_t>(exponent + 1));
    }
    return sign + out;
  }
  std::string mantissa = digits.substr(0, 1);
  if (digits.size() > 1) mantissa += "." + digits.substr(1);
  char exp_text[16];
  std::snprintf(exp_text, sizeof exp_text, "e%c%02d", exponent < 0 ? '-' : '+', std::abs(exponent));
  return sign + mantissa + exp_text;
}

namespace {

std::string string_repr(const std::string& s) {
  const bool has_single = s.find('\'') != std::string::npos;
  const bool has_double = s.find('"') != std::string::npos;
  const char quote = has_single && !has_double ? '"' : '\'';
  std::string out(1, quote);
  for (const char c : s) {
    const auto byte = static_cast<unsigned char>(c);
    if (c == quote || c == '\\') {
      out += '\\';
      out += c;
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (byte < 0x20 || byte == 0x7f) {
      char hex[8];
      std::snprintf(hex, sizeof hex, "\\x%02x", byte);
      out += hex;
    } else {
      out += c;
    }
  }
  out += quote;
  return out;
}

}  // namespace

namespace {

void append_bounded(std::string& out, std::string_view piece, size_t limit) {
  if (piece.size() > limit || out.size() > limit - piece.size()) {
    throw Error("chat template: a value prints to more than " + std::to_string(limit) + " bytes");
  }
  out += piece;
}

void append_repr(std::string& out, const Value& value, size_t limit) {
  if (value.is_list()) {
    append_bounded(out, "[", limit);
    bool first = true;
    for (const Value& item : value.items()) {
      if (!first) append_bounded(out, ", ", limit);
      first = false;
      append_repr(out, item, limit);
    }
    append_bounded(out, "]", limit);
  } else if (value.is_dict() || value.is_namespace()) {
    const DictData& dict = value.is_dict() ? value.dict_data() : value.namespace_data().attributes;
    append_bounded(out, value.is_dict() ? "{" : "<Namespace {", limit);
    bool first = true;
    for (const auto& [key, item] : dict.entries) {
      if (!first) append_bounded(out, ", ", limit);
      first = false;
      append_bounded(out, string_repr(key), limit);
      append_bounded(out, ": ", limit);
      append_repr(out, item, limit);
    }
    append_bounded(out, value.is_dict() ? "}" : "}>", limit);
  } else if (value.is_string()) {
    append_bounded(out, string_repr(value.str()), limit);
  } else {
    append_bounded(out, to_output(value, limit), limit);
  }
}

}  // namespace

std::string repr(const Value& value, size_t limit) {
  std::string out;
  append_repr(out, value, limit);
  return out;
}

std::string to_output(const Value& value, size_t limit) {
  if (value.is_undefined()) return "";
  if (value.is_none()) return "None";
  if (value.is_bool()) return value.as_bool() ? "True" : "False";
  if (value.is_int()) return std::to_string(value.as_int());
  if (value.is_float()) return float_repr(value.as_float());
  if (value.is_string()) {
    if (value.str().size() > limit) {
      throw Error("chat template: a value prints to more than " + std::to_string(limit) + " bytes");
    }
    return value.str();
  }
  if (value.is_callable()) return "<function " + value.callable_data().name + ">";
  return repr(value, limit);
}

bool equal(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (!a.is_float() && !b.is_float()) {
      const int64_t x = a.is_bool() ? a.as_bool() : a.as_int();
      const int64_t y = b.is_bool() ? b.as_bool() : b.as_int();
      return x == y;
    }
    const double x = a.is_float()  ? a.as_float()
                     : a.is_bool() ? a.as_bool()
                                   : static_cast<double>(a.as_int());
    const double y = b.is_float()  ? b.as_float()
                     : b.is_bool() ? b.as_bool()
                                   : static_cast<double>(b.as_int());
    return x == y;
  }
  if (a.v.index() != b.v.index()) return false;
  if (a.is_undefined() || a.is_none()) return true;
  if (a.is_string()) return a.str() == b.str();
  if (a.is_list()) {
    const auto& x = a.items();
    const auto& y = b.items();
    if (x.size() != y.size()) return false;
    for (size_t i = 0; i < x.size(); ++i) {
      if (!equal(x[i], y[i])) return false;
    }
    return true;
  }
  if (a.is_dict()) {
    const DictData& x = a.dict_data();
    const DictData& y = b.dict_data();
    if (x.entries.size() != y.entries.size()) return false;
    for (const auto& [key, item] : x.entries) {
      const Value* other = y.find(key);
      if (other == nullptr || !equal(item, *other)) return false;
    }
    return true;
  }
  if (a.is_namespace()) return &a.namespace_data() == &b.namespace_data();
  return &a.callable_data() == &b.callable_data();
}

namespace {

// The length of the UTF-8 sequence starting at s[i], or 1 when it does not decode.
size_t sequence_length(std::string_view s, size_t i) {
  const auto lead = static_cast<unsigned char>(s[i]);
  size_t length = 1;
  if (lead >= 0xC2 && lead <= 0xDF) {
    length = 2;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    length = 3;
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    length = 4;
  } else {
    return 1;
  }
  if (i + length > s.size()) return 1;
  for (size_t k = 1; k < length; ++k) {
    if ((static_cast<unsigned char>(s[i + k]) & 0xC0) != 0x80) return 1;
  }
  return length;
}

}  // namespace

std::vector<std::string_view> code_points(std::string_view s) {
  std::vector<std::string_view> out;
  for (size_t i = 0; i < s.size();) {
    const size_t length = sequence_length(s, i);
    out.push_back(s.substr(i, length));
    i += length;
  }
  return out;
}

size_t code_point_count(std::string_view s) {
  size_t count = 0;
  for (size_t i = 0; i < s.size(); i += sequence_length(s, i)) ++count;
  return count;
}

}  // namespace mb::chat

// SPDX-License-Identifier: MIT
// Filters, tests and methods with the behavior of Jinja2's and Python's own (jinja2/filters.py,
// jinja2/tests.py, str and dict methods), plus transformers' tojson and strftime_now.
#include <algorithm>
#include <array>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <ctime>

#include "chat/jinja_eval.h"
#include "core/error.h"

namespace mb::chat {

namespace {

constexpr std::array<std::string_view, 29> kFilters = {
    "abs",        "capitalize", "count",   "d",      "default",    "first", "float",  "indent",
    "int",        "items",      "join",    "last",   "length",     "list",  "lower",  "map",
    "rejectattr", "replace",    "reverse", "safe",   "selectattr", "sort",  "string", "title",
    "tojson",     "trim",       "upper",   "unique", "wordcount"};

constexpr std::array<std::string_view, 27> kTests = {
    "boolean", "callable", "defined", "divisibleby", "eq",       "equalto",  "even",   "false", "float",
    "ge",      "gt",       "in",      "integer",     "iterable", "le",       "lower",  "lt",    "mapping",
    "ne",      "none",     "number",  "odd",         "sameas",   "sequence", "string", "true",  "undefined"};

// Python's str.isspace() code points.
bool is_python_space(std::string_view c) {
  if (c.size() == 1) {
    const auto b = static_cast<unsigned char>(c[0]);
    return (b >= 0x09 && b <= 0x0d) || (b >= 0x1c && b <= 0x20);
  }
  static const std::array<std::string_view, 17> kWide = {
      "\xc2\x85",     "\xc2\xa0",     "\xe1\x9a\x80", "\xe2\x80\x80", "\xe2\x80\x81", "\xe2\x80\x82",
      "\xe2\x80\x83", "\xe2\x80\x84", "\xe2\x80\x85", "\xe2\x80\x86", "\xe2\x80\x87", "\xe2\x80\x88",
      "\xe2\x80\x89", "\xe2\x80\x8a", "\xe2\x80\xa8", "\xe2\x80\xa9", "\xe2\x80\xaf"};
  if (std::find(kWide.begin(), kWide.end(), c) != kWide.end()) return true;
  return c == "\xe2\x81\x9f" || c == "\xe3\x80\x80";
}

const std::string& need_string(const Value& v, const char* what, int line) {
  if (v.is_undefined()) fail_at(std::string(what) + " of an undefined value", line);
  if (!v.is_string()) fail_at(std::string(what) + " needs a string, not '" + v.type_name() + "'", line);
  return v.str();
}

// Case mapping is ASCII-only (a documented limitation: roles and markers are ASCII).
std::string ascii_lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}
std::string ascii_upper(std::string s) {
  for (char& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s;
}
bool is_alpha(char c) {
  return std::isalpha(static_cast<unsigned char>(c)) != 0;
}

// Python's str.capitalize(): the first character upper case, the rest lower case.
std::string capitalize(const std::string& s) {
  std::string out = ascii_lower(s);
  if (!out.empty()) out[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(out[0])));
  return out;
}

// Python's str.title(): a letter after a non-letter is upper case, any other lower case.
std::string python_title(const std::string& s) {
  std::string out = s;
  bool previous_cased = false;
  for (char& c : out) {
    const bool alpha = is_alpha(c);
    const auto byte = static_cast<unsigned char>(c);
    c = static_cast<char>(alpha ? (previous_cased ? std::tolower(byte) : std::toupper(byte)) : c);
    previous_cased = alpha;
  }
  return out;
}

// Jinja's title filter: words start after whitespace, '-', '(', '{', '[' or '<'.
std::string jinja_title(const std::string& s) {
  std::string out;
  bool word_start = true;
  for (const char c : s) {
    const bool separator = std::isspace(static_cast<unsigned char>(c)) || c == '-' || c == '(' || c == '{' ||
                           c == '[' || c == '<';
    const auto byte = static_cast<unsigned char>(c);
    out += separator ? c : static_cast<char>(word_start ? std::toupper(byte) : std::tolower(byte));
    word_start = separator;
  }
  return out;
}

std::string python_replace(const std::string& s, const std::string& old, const std::string& replacement,
                           int64_t count, Budget& budget, int line) {
  std::string out;
  const auto grow = [&](std::string_view piece) {
    budget.charge_string(0, line);
    if (out.size() + piece.size() > budget.max_string_bytes())
      fail_at("a string grows past the output limit", line);
    out += piece;
  };
  int64_t done = 0;
  if (old.empty()) {
    // Python inserts the replacement before every character and at the end.
    for (std::string_view c : code_points(s)) {
      if (count < 0 || done < count) {
        grow(replacement);
        ++done;
      }
      grow(c);
    }
    if (count < 0 || done < count) grow(replacement);
    return out;
  }
  size_t pos = 0;
  while (count < 0 || done < count) {
    const size_t found = s.find(old, pos);
    if (found == std::string::npos) break;
    grow(std::string_view(s).substr(pos, found - pos));
    grow(replacement);
    pos = found + old.size();
    ++done;
  }
  grow(std::string_view(s).substr(pos));
  return out;
}

// Python's str.split(sep, maxsplit); with no separator, runs of whitespace separate and
// leading and trailing whitespace is dropped.
std::vector<Value> python_split(const std::string& s, const Value* sep, int64_t maxsplit, int line) {
  std::vector<Value> parts;
  if (sep == nullptr || sep->is_none()) {
    const auto chars = code_points(s);
    size_t i = 0;
    while (true) {
      while (i < chars.size() && is_python_space(chars[i])) ++i;
      if (i == chars.size()) break;
      if (maxsplit >= 0 && static_cast<int64_t>(parts.size()) == maxsplit) {
        std::string rest;
        for (size_t k = i; k < chars.size(); ++k) rest += chars[k];
        rest = python_strip(rest, nullptr, false, true);
        parts.push_back(Value::string(rest));
        break;
      }
      std::string word;
      while (i < chars.size() && !is_python_space(chars[i])) word += chars[i++];
      parts.push_back(Value::string(std::move(word)));
    }
    return parts;
  }
  const std::string& separator = need_string(*sep, "split()", line);
  if (separator.empty()) fail_at("split() separator is empty", line);
  size_t pos = 0;
  while (maxsplit < 0 || static_cast<int64_t>(parts.size()) < maxsplit) {
    const size_t found = s.find(separator, pos);
    if (found == std::string::npos) break;
    parts.push_back(Value::string(s.substr(pos, found - pos)));
    pos = found + separator.size();
  }
  parts.push_back(Value::string(s.substr(pos)));
  return parts;
}

int64_t int_arg(const CallArgs& args, size_t position, std::string_view name, int64_t fallback) {
  const Value* v = args.get(position, name);
  if (v == nullptr || v->is_none()) return fallback;
  if (!v->is_int() && !v->is_bool()) fail_at("'" + std::string(name) + "' must be an integer", args.line);
  return v->is_bool() ? v->as_bool() : v->as_int();
}

bool bool_arg(const CallArgs& args, size_t position, std::string_view name, bool fallback) {
  const Value* v = args.get(position, name);
  return v == nullptr ? fallback : truthy(*v);
}

std::vector<Value> as_sequence(const Value& v, const char* what, int line) {
  if (v.is_undefined()) return {};
  if (v.is_list()) return v.items();
  std::vector<Value> out;
  if (v.is_dict()) {
    for (const auto& entry : v.dict_data().entries) out.push_back(Value::string(entry.first));
    return out;
  }
  if (v.is_string()) {
    for (std::string_view c : code_points(v.str())) out.push_back(Value::string(std::string(c)));
    return out;
  }
  fail_at(std::string(what) + ": '" + v.type_name() + "' object is not iterable", line);
}

// Python's int(text) for the int filter: optional sign, digits and single underscores, with
// surrounding whitespace; anything else is not an integer.
bool parse_python_int(std::string_view text, int64_t& out) {
  const std::string trimmed = python_strip(text, nullptr, true, true);
  size_t i = 0;
  bool negative = false;
  if (i < trimmed.size() && (trimmed[i] == '+' || trimmed[i] == '-')) negative = trimmed[i++] == '-';
  if (i == trimmed.size()) return false;
  int64_t value = 0;
  bool last_digit = false;
  for (; i < trimmed.size(); ++i) {
    const char c = trimmed[i];
    if (c == '_' && last_digit) {
      last_digit = false;
      continue;
    }
    if (c < '0' || c > '9') return false;
    if (__builtin_mul_overflow(value, 10, &value) || __builtin_add_overflow(value, c - '0', &value))
      return false;
    last_digit = true;
  }
  if (!last_digit) return false;
  out = negative ? -value : value;
  return true;
}

bool parse_python_float(std::string_view text, double& out) {
  const std::string trimmed = python_strip(text, nullptr, true, true);
  if (trimmed.empty()) return false;
  char* end = nullptr;
  out = std::strtod(trimmed.c_str(), &end);
  return end == trimmed.c_str() + trimmed.size();
}

Value attribute_of(const Value& item, const Value& attribute, int line) {
  if (attribute.is_int()) {
    if (!item.is_list()) return Value::undefined();
    const int64_t index = attribute.as_int();
    const auto& items = item.items();
    return index >= 0 && index < static_cast<int64_t>(items.size()) ? items[static_cast<size_t>(index)]
                                                                    : Value::undefined();
  }
  const std::string& path = need_string(attribute, "attribute", line);
  // Jinja resolves "a.b" attribute paths one part at a time.
  Value current = item;
  size_t start = 0;
  while (true) {
    const size_t dot = path.find('.', start);
    current = get_attribute(current, path.substr(start, dot - start), line);
    if (dot == std::string::npos || current.is_undefined()) return current;
    start = dot + 1;
  }
}

Value select_or_reject(const Value& operand, const CallArgs& args, bool select) {
  const Value* attribute = args.get(0, "attribute");
  if (attribute == nullptr) fail_at("selectattr/rejectattr need an attribute name", args.line);
  CallArgs test_args;
  test_args.line = args.line;
  for (size_t i = 2; i < args.positional.size(); ++i) test_args.positional.push_back(args.positional[i]);
  std::vector<Value> kept;
  for (const Value& item : as_sequence(operand, "selectattr", args.line)) {
    const Value value = attribute_of(item, *attribute, args.line);
    bool passes = truthy(value);
    if (args.positional.size() >= 2) {
      const std::string& test = need_string(args.positional[1], "test name", args.line);
      if (!is_known_test(test)) fail_at("unsupported test '" + test + "'", args.line);
      passes = apply_test(test, value, test_args);
    }
    if (passes == select) kept.push_back(item);
  }
  return Value::list(std::move(kept));
}

Value map_filter(const Value& operand, const CallArgs& args, Budget& budget) {
  std::vector<Value> out;
  const std::vector<Value> items = as_sequence(operand, "map", args.line);
  if (const Value* attribute = args.get(SIZE_MAX, "attribute")) {
    const Value* fallback = args.get(SIZE_MAX, "default");
    for (const Value& item : items) {
      Value value = attribute_of(item, *attribute, args.line);
      out.push_back(value.is_undefined() && fallback ? *fallback : value);
    }
    return budget.list(std::move(out), args.line);
  }
  if (args.positional.empty()) fail_at("map needs a filter name or attribute=", args.line);
  const std::string& filter = need_string(args.positional[0], "map filter name", args.line);
  if (!is_known_filter(filter) || filter == "map") fail_at("unsupported filter '" + filter + "'", args.line);
  CallArgs rest;
  rest.line = args.line;
  rest.positional.assign(args.positional.begin() + 1, args.positional.end());
  rest.keyword = args.keyword;
  for (const Value& item : items) out.push_back(apply_filter(filter, item, rest, budget));
  return budget.list(std::move(out), args.line);
}

int sort_order(const Value& a, const Value& b, bool case_sensitive, int line) {
  if (a.is_string() && b.is_string()) {
    const std::string x = case_sensitive ? a.str() : ascii_lower(a.str());
    const std::string y = case_sensitive ? b.str() : ascii_lower(b.str());
    return x < y ? -1 : x > y ? 1 : 0;
  }
  if (a.is_number() && b.is_number()) {
    const double x = a.is_float()  ? a.as_float()
                     : a.is_bool() ? a.as_bool()
                                   : static_cast<double>(a.as_int());
    const double y = b.is_float()  ? b.as_float()
                     : b.is_bool() ? b.as_bool()
                                   : static_cast<double>(b.as_int());
    return x < y ? -1 : x > y ? 1 : 0;
  }
  fail_at("sort cannot compare '" + std::string(a.type_name()) + "' and '" + b.type_name() + "'", line);
}

}  // namespace

bool is_known_filter(std::string_view name) {
  return std::find(kFilters.begin(), kFilters.end(), name) != kFilters.end();
}
bool is_known_test(std::string_view name) {
  return std::find(kTests.begin(), kTests.end(), name) != kTests.end();
}

std::string python_strip(std::string_view s, const std::string* chars, bool left, bool right) {
  const auto points = code_points(s);
  std::vector<std::string_view> strip_set;
  if (chars != nullptr) strip_set = code_points(*chars);
  const auto strips = [&](std::string_view c) {
    return chars == nullptr ? is_python_space(c)
                            : std::find(strip_set.begin(), strip_set.end(), c) != strip_set.end();
  };
  size_t begin = 0;
  size_t end = points.size();
  if (left) {
    while (begin < end && strips(points[begin])) ++begin;
  }
  if (right) {
    while (end > begin && strips(points[end - 1])) --end;
  }
  std::string out;
  for (size_t i = begin; i < end; ++i) out += points[i];
  return out;
}

Value get_attribute(const Value& object, std::string_view name, int line) {
  (void)line;
  if (object.is_dict() || object.is_namespace()) {
    const DictData& data = object.is_dict() ? object.dict_data() : object.namespace_data().attributes;
    if (const Value* value = data.find(name)) return *value;
  }
  return Value::undefined(std::string(object.is_dict() ? "dict object" : object.type_name()) +
                          "' has no attribute '" + std::string(name));
}

// join(d="", attribute=none): the items' texts (or their attribute's) joined by d.
Value join_filter(const Value& operand, const CallArgs& args, Budget& budget) {
  const int line = args.line;
  args.check("join", 2, {"d", "attribute"});
  const Value* separator = args.get(0, "d");
  const Value* attribute = args.get(1, "attribute");
  const std::string sep = separator ? to_output(*separator, budget.max_string_bytes()) : "";
  std::string out;
  bool first = true;
  for (const Value& item : as_sequence(operand, "join", line)) {
    const Value part = attribute ? attribute_of(item, *attribute, line) : item;
    const std::string text = to_output(part, budget.max_string_bytes());
    budget.charge_string(out.size() + sep.size() + text.size(), line);
    if (!first) out += sep;
    first = false;
    out += text;
  }
  return Value::string(std::move(out));
}

// Python's int() of a value, as Jinja's int filter applies it: the default for what does not parse.
Value int_filter(const Value& operand, const CallArgs& args) {
  args.check("int", 2, {"default", "base"});
  const Value* fallback = args.get(0, "default");
  const Value result = fallback ? *fallback : Value::integer(0);
  if (operand.is_int()) return operand;
  if (operand.is_bool()) return Value::integer(operand.as_bool());
  if (operand.is_float()) {
    if (!std::isfinite(operand.as_float()) || std::fabs(operand.as_float()) >= 9.2e18) return result;
    return Value::integer(static_cast<int64_t>(operand.as_float()));
  }
  if (operand.is_string()) {
    int64_t parsed = 0;
    double as_float = 0;
    if (parse_python_int(operand.str(), parsed)) return Value::integer(parsed);
    if (parse_python_float(operand.str(), as_float) && std::isfinite(as_float) &&
        std::fabs(as_float) < 9.2e18) {
      return Value::integer(static_cast<int64_t>(as_float));
    }
  }
  return result;
}

// sort(reverse=false, case_sensitive=false, attribute=none), stable, as Jinja sorts.
Value sort_filter(const Value& operand, const CallArgs& args) {
  const int line = args.line;
  args.check("sort", 3, {"reverse", "case_sensitive", "attribute"});
  const bool reverse = bool_arg(args, 0, "reverse", false);
  const bool case_sensitive = bool_arg(args, 1, "case_sensitive", false);
  const Value* attribute = args.get(2, "attribute");
  std::vector<Value> items = as_sequence(operand, "sort", line);
  const auto key = [&](const Value& item) { return attribute ? attribute_of(item, *attribute, line) : item; };
  std::stable_sort(items.begin(), items.end(), [&](const Value& a, const Value& b) {
    const int c = sort_order(key(a), key(b), case_sensitive, line);
    return reverse ? c > 0 : c < 0;
  });
  return Value::list(std::move(items));
}

// indent(width=4, first=false, blank=false): every line but the first (unless `first`) and
// blank lines (unless `blank`) prefixed by width spaces, or by width itself when it is a string.
Value indent_filter(const Value& operand, const CallArgs& args, Budget& budget) {
  const int line = args.line;
  args.check("indent", 3, {"width", "first", "blank"});
  const Value* width_value = args.get(0, "width");
  std::string pad(4, ' ');
  if (width_value && width_value->is_string()) pad = width_value->str();
  if (width_value && (width_value->is_int() || width_value->is_bool())) {
    pad.assign(static_cast<size_t>(std::clamp<int64_t>(int_arg(args, 0, "width", 4), 0, 256)), ' ');
  }
  const bool first = bool_arg(args, 1, "first", false);
  const bool blank = bool_arg(args, 2, "blank", false);
  const std::string text = to_output(operand, budget.max_string_bytes());
  std::string out;
  size_t start = 0;
  bool first_line = true;
  while (true) {
    const size_t newline = text.find('\n', start);
    const std::string_view piece = std::string_view(text).substr(start, newline - start);
    const bool indent = (first_line ? first : true) && (blank || !piece.empty());
    budget.charge_string(out.size() + pad.size() + piece.size() + 1, line);
    if (indent) out += pad;
    out += piece;
    if (newline == std::string::npos) break;
    out += '\n';
    start = newline + 1;
    first_line = false;
  }
  return Value::string(std::move(out));
}

Value apply_filter(std::string_view name, const Value& operand, const CallArgs& args, Budget& budget) {
  const int line = args.line;
  if (name == "default" || name == "d") {
    args.check("default", 2, {"default_value", "boolean"});
    const Value* fallback = args.get(0, "default_value");
    const bool boolean = bool_arg(args, 1, "boolean", false);
    if (operand.is_undefined() || (boolean && !truthy(operand))) {
      return fallback ? *fallback : Value::string("");
    }
    return operand;
  }
  if (name == "safe") return operand;
  if (name == "length" || name == "count") {
    if (operand.is_undefined()) return Value::integer(0);
    if (operand.is_string()) return Value::integer(static_cast<int64_t>(code_point_count(operand.str())));
    if (operand.is_list()) return Value::integer(static_cast<int64_t>(operand.items().size()));
    if (operand.is_dict()) return Value::integer(static_cast<int64_t>(operand.dict_data().entries.size()));
    fail_at("object of type '" + std::string(operand.type_name()) + "' has no len()", line);
  }
  if (name == "tojson") return budget.string(to_json(operand, args, budget), line);
  if (name == "string") return budget.string(to_output(operand, budget.max_string_bytes()), line);
  if (name == "trim") {
    args.check("trim", 1, {"chars"});
    const Value* chars = args.get(0, "chars");
    const std::string text = to_output(operand, budget.max_string_bytes());
    return Value::string(
        python_strip(text, chars && chars->is_string() ? &chars->str() : nullptr, true, true));
  }
  if (name == "upper") return Value::string(ascii_upper(to_output(operand, budget.max_string_bytes())));
  if (name == "lower") return Value::string(ascii_lower(to_output(operand, budget.max_string_bytes())));
  if (name == "capitalize") return Value::string(capitalize(to_output(operand, budget.max_string_bytes())));
  if (name == "title") return Value::string(jinja_title(to_output(operand, budget.max_string_bytes())));
  if (name == "wordcount") {
    return Value::integer(static_cast<int64_t>(
        python_split(to_output(operand, budget.max_string_bytes()), nullptr, -1, line).size()));
  }
  if (name == "replace") {
    args.check("replace", 3, {"old", "new", "count"});
    const Value* old = args.get(0, "old");
    const Value* replacement = args.get(1, "new");
    if (old == nullptr || replacement == nullptr) fail_at("replace needs old and new strings", line);
    return budget.string(python_replace(to_output(operand, budget.max_string_bytes()),
                                        to_output(*old, budget.max_string_bytes()),
                                        to_output(*replacement, budget.max_string_bytes()),
                                        int_arg(args, 2, "count", -1), budget, line),
                         line);
  }
  if (name == "first" || name == "last") {
    const std::vector<Value> items = as_sequence(operand, "first/last", line);
    if (items.empty()) return Value::undefined("no first or last item of an empty sequence");
    return name == "first" ? items.front() : items.back();
  }
  if (name == "join") return join_filter(operand, args, budget);
  if (name == "list") return budget.list(as_sequence(operand, "list", line), line);
  if (name == "reverse") {
    if (operand.is_string()) {
      auto chars = code_points(operand.str());
      std::string out;
      for (auto it = chars.rbegin(); it != chars.rend(); ++it) out += *it;
      return Value::string(std::move(out));
    }
    std::vector<Value> items = as_sequence(operand, "reverse", line);
    std::reverse(items.begin(), items.end());
    return Value::list(std::move(items));
  }
  if (name == "items") {
    if (operand.is_undefined()) return Value::list({});
    if (!operand.is_dict())
      fail_at("items needs a mapping, not '" + std::string(operand.type_name()) + "'", line);
    std::vector<Value> pairs;
    for (const auto& [key, value] : operand.dict_data().entries)
      pairs.push_back(Value::list({Value::string(key), value}));
    return budget.list(std::move(pairs), line);
  }
  if (name == "int") return int_filter(operand, args);
  if (name == "float") {
    const Value* fallback = args.get(0, "default");
    const Value result = fallback ? *fallback : Value::floating(0.0);
    if (operand.is_float()) return operand;
    if (operand.is_int()) return Value::floating(static_cast<double>(operand.as_int()));
    if (operand.is_bool()) return Value::floating(operand.as_bool());
    double parsed = 0;
    if (operand.is_string() && parse_python_float(operand.str(), parsed)) return Value::floating(parsed);
    return result;
  }
  if (name == "abs") {
    if (operand.is_int() && operand.as_int() != INT64_MIN)
      return Value::integer(std::llabs(operand.as_int()));
    if (operand.is_float()) return Value::floating(std::fabs(operand.as_float()));
    if (operand.is_bool()) return Value::integer(operand.as_bool());
    fail_at("bad operand type for abs(): '" + std::string(operand.type_name()) + "'", line);
  }
  if (name == "selectattr" || name == "rejectattr") {
    return select_or_reject(operand, args, name == "selectattr");
  }
  if (name == "map") return map_filter(operand, args, budget);
  if (name == "unique") {
    std::vector<Value> out;
    for (const Value& item : as_sequence(operand, "unique", line)) {
      const bool seen = std::any_of(out.begin(), out.end(), [&](const Value& kept) {
        return kept.is_string() && item.is_string() ? ascii_lower(kept.str()) == ascii_lower(item.str())
                                                    : equal(kept, item);
      });
      if (!seen) out.push_back(item);
    }
    return Value::list(std::move(out));
  }
  if (name == "sort") return sort_filter(operand, args);
  if (name == "indent") return indent_filter(operand, args, budget);
  fail_at("unsupported filter '" + std::string(name) + "'", line);
}

bool apply_test(std::string_view name, const Value& operand, const CallArgs& args) {
  const int line = args.line;
  if (name == "defined") return !operand.is_undefined();
  if (name == "undefined") return operand.is_undefined();
  if (name == "none") return operand.is_none();
  if (name == "string") return operand.is_string();
  if (name == "mapping") return operand.is_dict();
  if (name == "sequence") return operand.is_string() || operand.is_list() || operand.is_dict();
  if (name == "iterable")
    return operand.is_string() || operand.is_list() || operand.is_dict() || operand.is_undefined();
  if (name == "number") return operand.is_number();
  if (name == "integer") return operand.is_int();
  if (name == "float") return operand.is_float();
  if (name == "boolean") return operand.is_bool();
  if (name == "true") return operand.is_bool() && operand.as_bool();
  if (name == "false") return operand.is_bool() && !operand.as_bool();
  if (name == "callable") return operand.is_callable();
  if (name == "lower" || name == "upper") {
    const std::string& text = need_string(operand, "the lower/upper test", line);
    return text == (name == "lower" ? ascii_lower(text) : ascii_upper(text));
  }
  if (name == "odd" || name == "even" || name == "divisibleby") {
    if (!operand.is_int() && !operand.is_bool())
      fail_at("the " + std::string(name) + " test needs an integer", line);
    const int64_t value = operand.is_bool() ? operand.as_bool() : operand.as_int();
    if (name == "odd") return value % 2 != 0;
    if (name == "even") return value % 2 == 0;
    const int64_t divisor = int_arg(args, 0, "num", 0);
    if (divisor == 0) fail_at("divisibleby 0", line);
    return divisor == -1 || value % divisor == 0;
  }
  const Value* other = args.get(0, "b");
  if (other == nullptr) fail_at("the " + std::string(name) + " test needs an argument", line);
  if (name == "eq" || name == "equalto") return equal(operand, *other);
  if (name == "ne") return !equal(operand, *other);
  if (name == "sameas") {
    return (operand.is_none() && other->is_none()) ||
           (operand.is_bool() && other->is_bool() && operand.as_bool() == other->as_bool());
  }
  if (name == "in") {
    if (other->is_string() && operand.is_string())
      return other->str().find(operand.str()) != std::string::npos;
    if (other->is_list()) {
      return std::any_of(other->items().begin(), other->items().end(),
                         [&](const Value& v) { return equal(v, operand); });
    }
    if (other->is_dict()) return operand.is_string() && other->dict_data().find(operand.str()) != nullptr;
    fail_at("the in test needs a string, list or mapping", line);
  }
  const bool numbers = operand.is_number() && other->is_number();
  const bool strings = operand.is_string() && other->is_string();
  if (!numbers && !strings) fail_at("the " + std::string(name) + " test cannot compare these values", line);
  int c = 0;
  if (strings) {
    c = operand.str().compare(other->str());
  } else {
    const double x = operand.is_float()  ? operand.as_float()
                     : operand.is_bool() ? operand.as_bool()
                                         : static_cast<double>(operand.as_int());
    const double y = other->is_float()  ? other->as_float()
                     : other->is_bool() ? other->as_bool()
                                        : static_cast<double>(other->as_int());
    c = x < y ? -1 : x > y ? 1 : 0;
  }
  if (name == "lt") return c < 0;
  if (name == "le") return c <= 0;
  if (name == "gt") return c > 0;
  return c >= 0;  // "ge"
}

Value call_method(const Value& object, std::string_view name, const CallArgs& args, Budget& budget) {
  const int line = args.line;
  if (object.is_dict()) {
    const DictData& dict = object.dict_data();
    if (name == "get") {
      args.check("get()", 2, {});
      if (args.positional.empty()) fail_at("get() needs a key", line);
      const Value* value = args.positional[0].is_string() ? dict.find(args.positional[0].str()) : nullptr;
      if (value != nullptr) return *value;
      return args.positional.size() > 1 ? args.positional[1] : Value::none();
    }
    if (name == "items" || name == "keys" || name == "values") {
      args.check("items()", 0, {});
      std::vector<Value> out;
      for (const auto& [key, value] : dict.entries) {
        if (name == "items") out.push_back(Value::list({Value::string(key), value}));
        if (name == "keys") out.push_back(Value::string(key));
        if (name == "values") out.push_back(value);
      }
      return budget.list(std::move(out), line);
    }
  }
  if (object.is_string()) {
    const std::string& s = object.str();
    if (name == "strip" || name == "lstrip" || name == "rstrip") {
      args.check("strip()", 1, {});
      const Value* chars = args.get(0, "");
      const std::string* set = chars && chars->is_string() ? &chars->str() : nullptr;
      return Value::string(python_strip(s, set, name != "rstrip", name != "lstrip"));
    }
    if (name == "lower") return Value::string(ascii_lower(s));
    if (name == "upper") return Value::string(ascii_upper(s));
    if (name == "title") return Value::string(python_title(s));
    if (name == "capitalize") return Value::string(capitalize(s));
    if (name == "startswith" || name == "endswith") {
      if (args.positional.empty()) fail_at(std::string(name) + "() needs an argument", line);
      std::vector<Value> options =
          args.positional[0].is_list() ? args.positional[0].items() : std::vector<Value>{args.positional[0]};
      for (const Value& option : options) {
        const std::string& affix = need_string(option, "startswith()/endswith()", line);
        const bool hit =
            affix.size() <= s.size() &&
            (name == "startswith" ? s.compare(0, affix.size(), affix) == 0
                                  : s.compare(s.size() - affix.size(), affix.size(), affix) == 0);
        if (hit) return Value::boolean(true);
      }
      return Value::boolean(false);
    }
    if (name == "split") {
      args.check("split()", 2, {"sep", "maxsplit"});
      return budget.list(python_split(s, args.get(0, "sep"), int_arg(args, 1, "maxsplit", -1), line), line);
    }
    if (name == "replace") {
      if (args.positional.size() < 2) fail_at("replace() needs old and new strings", line);
      return budget.string(python_replace(s, need_string(args.positional[0], "replace()", line),
                                          need_string(args.positional[1], "replace()", line),
                                          int_arg(args, 2, "count", -1), budget, line),
                           line);
    }
    if (name == "join") {
      if (args.positional.empty()) fail_at("join() needs an iterable", line);
      std::string out;
      bool first = true;
      for (const Value& item : as_sequence(args.positional[0], "join()", line)) {
        const std::string& text = need_string(item, "join()", line);
        budget.charge_string(out.size() + s.size() + text.size(), line);
        if (!first) out += s;
        first = false;
        out += text;
      }
      return Value::string(std::move(out));
    }
    if (name == "find") {
      if (args.positional.empty()) fail_at("find() needs a string", line);
      const size_t found = s.find(need_string(args.positional[0], "find()", line));
      return Value::integer(
          found == std::string::npos ? -1 : static_cast<int64_t>(code_point_count(s.substr(0, found))));
    }
  }
  fail_at("unsupported method '" + std::string(name) + "' on " + object.type_name(), line);
}

std::string strftime_now(const std::string& format, const std::optional<int64_t>& now_unix_seconds,
                         int line) {
  if (format.size() > 256) fail_at("strftime_now() format is too long", line);
  const std::time_t now = now_unix_seconds ? static_cast<std::time_t>(*now_unix_seconds) : std::time(nullptr);
  std::tm parts{};
  const bool ok = now_unix_seconds ? gmtime_r(&now, &parts) != nullptr : localtime_r(&now, &parts) != nullptr;
  if (!ok) fail_at("strftime_now() cannot represent the time", line);
  if (format.empty()) return "";
  char buffer[4096];
  const size_t written = std::strftime(buffer, sizeof buffer, format.c_str(), &parts);
  if (written == 0) fail_at("strftime_now() format produced nothing or too much", line);
  return std::string(buffer, written);
}

}  // namespace mb::chat

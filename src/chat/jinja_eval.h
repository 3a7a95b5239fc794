// SPDX-License-Identifier: MIT
// The evaluator of parsed chat templates, and the builtins (filters, tests, methods, globals) it
// dispatches to. Internal to src/chat; chat_template.h is the public interface.
#pragma once

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "chat/jinja_ast.h"
#include "chat/jinja_value.h"

namespace mb::chat {

struct RenderLimits {
  std::size_t max_output_bytes = 0;
  int64_t max_loop_iterations = 0;
  int max_recursion_depth = 0;
  std::optional<int64_t> now_unix_seconds;
};

[[noreturn]] void fail_at(const std::string& problem, int line);

// Bounds everything a render builds: each string at most max_output_bytes, and all strings and
// lists together at most a fixed multiple of it, so that a loop that keeps doubling a string or a
// list stops with mb::Error long before memory runs out.
class Budget {
 public:
  explicit Budget(std::size_t max_string_bytes) : max_string_bytes_(max_string_bytes) {}
  std::size_t max_string_bytes() const { return max_string_bytes_; }
  // Throws unless a string of `bytes` may be built, and counts it.
  void charge_string(std::size_t bytes, int line);
  void charge_list(std::size_t elements, int line);
  Value string(std::string s, int line) {
    charge_string(s.size(), line);
    return Value::string(std::move(s));
  }
  Value list(std::vector<Value> items, int line) {
    charge_list(items.size(), line);
    return Value::list(std::move(items));
  }

 private:
  void charge(std::size_t amount, int line);
  std::size_t max_string_bytes_;
  std::size_t used_ = 0;
};

// Arguments of a filter, test, method or global call: positional values then keyword values.
struct CallArgs {
  std::vector<Value> positional;
  std::vector<std::pair<std::string, Value>> keyword;
  int line = 0;

  // The argument at `position`, or the keyword argument `name`, or nullptr.
  const Value* get(size_t position, std::string_view name) const;
  // Refuses arguments beyond the first `max_positional` and keywords not in `names`.
  void check(const char* what, size_t max_positional, std::initializer_list<std::string_view> names) const;
};

// Renders the template with `variables` (messages, add_generation_prompt, bos_token, ...).
std::string render_nodes(const std::vector<std::unique_ptr<Node>>& nodes, const DictData& variables,
                         const RenderLimits& limits);

// Builtins (jinja_builtins.cc).
Value apply_filter(std::string_view name, const Value& operand, const CallArgs& args, Budget& budget);
bool apply_test(std::string_view name, const Value& operand, const CallArgs& args);
Value call_method(const Value& object, std::string_view name, const CallArgs& args, Budget& budget);
// Attribute access as Jinja does it for mappings and namespaces (a missing one is Undefined).
Value get_attribute(const Value& object, std::string_view name, int line);
// tojson as transformers defines it: json.dumps(value, ensure_ascii=False, indent=indent,
// separators=separators, sort_keys=sort_keys).
std::string to_json(const Value& value, const CallArgs& args, Budget& budget);
// JSON text as Python's json.loads reads it into template values: objects as mappings in their
// key order (a repeated key keeps its first position and its last value), integers apart from
// floats. Throws mb::Error "<source> ..." for invalid JSON, integers beyond int64, nesting deeper
// than kMaxValueDepth and more than about a million arrays and objects.
Value parse_json_value(std::string_view text, const std::string& source);
// strftime of the render time (`now_unix_seconds` read as UTC, else the local time).
std::string strftime_now(const std::string& format, const std::optional<int64_t>& now_unix_seconds, int line);
// Python's str.strip family on code points, with Python's whitespace when chars is null.
std::string python_strip(std::string_view s, const std::string* chars, bool left, bool right);

}  // namespace mb::chat

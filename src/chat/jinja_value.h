// SPDX-License-Identifier: MIT
// Values of the Jinja subset used by chat templates, with Python's semantics (what Jinja2 inherits
// and what transformers' apply_chat_template therefore produces): none, booleans, 64-bit integers,
// floats, strings, lists (tuples are lists here), mappings that keep insertion order, namespaces
// (the only mutable value, as `{% set ns.x = ... %}` needs), callables and Jinja's Undefined.
//
// Strings, lists and mappings are immutable and shared between copies, so copying a Value is cheap
// and a list that holds the same long string a thousand times holds it once. Every container
// records its nesting depth when built, so that no later recursion over it (printing, tojson,
// comparison, destruction) can be driven past a fixed bound.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <variant>
#include <vector>

namespace mb::chat {

struct Value;
struct ListData;
struct DictData;
struct NamespaceData;
struct Callable;

// Jinja's default Undefined: renders as "", is falsy, iterates as empty; `hint` names what was
// looked up, for error messages when it is used in a way that needs a value.
struct Undefined {
  std::shared_ptr<const std::string> hint;
};
struct None {};

// Containers nest at most this deep; building a deeper one throws mb::Error.
inline constexpr int kMaxValueDepth = 64;

struct Value {
  using Storage = std::variant<Undefined, None, bool, int64_t, double, std::shared_ptr<const std::string>,
                               std::shared_ptr<const ListData>, std::shared_ptr<const DictData>,
                               std::shared_ptr<NamespaceData>, std::shared_ptr<const Callable>>;
  Storage v;

  Value() = default;
  explicit Value(Storage storage) : v(std::move(storage)) {}
  static Value undefined(std::string hint = {});
  static Value none() { return Value(Storage(None{})); }
  static Value boolean(bool b) { return Value(Storage(std::in_place_type<bool>, b)); }
  static Value integer(int64_t i) { return Value(Storage(std::in_place_type<int64_t>, i)); }
  static Value floating(double d) { return Value(Storage(std::in_place_type<double>, d)); }
  static Value string(std::string s);
  static Value list(std::vector<Value> items);
  static Value dict(DictData data);
  static Value ns(std::shared_ptr<NamespaceData> data) { return Value(Storage(std::move(data))); }
  static Value callable(std::shared_ptr<const Callable> fn) { return Value(Storage(std::move(fn))); }

  bool is_undefined() const { return std::holds_alternative<Undefined>(v); }
  bool is_none() const { return std::holds_alternative<None>(v); }
  bool is_bool() const { return std::holds_alternative<bool>(v); }
  bool is_int() const { return std::holds_alternative<int64_t>(v); }
  bool is_float() const { return std::holds_alternative<double>(v); }
  bool is_number() const { return is_int() || is_float() || is_bool(); }
  bool is_string() const { return std::holds_alternative<std::shared_ptr<const std::string>>(v); }
  bool is_list() const { return std::holds_alternative<std::shared_ptr<const ListData>>(v); }
  bool is_dict() const { return std::holds_alternative<std::shared_ptr<const DictData>>(v); }
  bool is_namespace() const { return std::holds_alternative<std::shared_ptr<NamespaceData>>(v); }
  bool is_callable() const { return std::holds_alternative<std::shared_ptr<const Callable>>(v); }

  bool as_bool() const { return std::get<bool>(v); }
  int64_t as_int() const { return std::get<int64_t>(v); }
  double as_float() const { return std::get<double>(v); }
  const std::string& str() const { return *std::get<std::shared_ptr<const std::string>>(v); }
  const ListData& list_data() const { return *std::get<std::shared_ptr<const ListData>>(v); }
  const std::vector<Value>& items() const;
  const DictData& dict_data() const { return *std::get<std::shared_ptr<const DictData>>(v); }
  NamespaceData& namespace_data() const { return *std::get<std::shared_ptr<NamespaceData>>(v); }
  const Callable& callable_data() const { return *std::get<std::shared_ptr<const Callable>>(v); }
  const std::string& undefined_hint() const;

  // Container nesting depth: 0 for scalars and strings, 1 + the deepest element otherwise.
  int depth() const;
  // Python's type name ("str", "int", "list", "dict", ...), for error messages.
  const char* type_name() const;
};

struct ListData {
  std::vector<Value> items;
  int depth = 1;
};

// A mapping with string keys in insertion order (Python dicts keep it, and tojson shows it).
struct DictData {
  std::vector<std::pair<std::string, Value>> entries;
  std::unordered_map<std::string, size_t> index;
  int depth = 1;

  const Value* find(std::string_view key) const;
  // Inserts or replaces, keeping the first insertion's position as Python does.
  void set(std::string key, Value value);
};

struct NamespaceData {
  DictData attributes;
};

// Something a template can call: a builtin global (raise_exception, namespace, range, dict,
// strftime_now) or a macro defined by the template.
struct Callable {
  enum class Kind { RaiseException, Namespace, Range, Dict, StrftimeNow, Macro } kind;
  const void* macro = nullptr;  // the chat::Node of a macro
  std::string name;
};

// Python's truth value (Undefined and none are false, empty strings and containers are false).
bool truthy(const Value& value);

// str(value) as Python prints it: True/False/None, repr-style floats ("1.0", "1e+16"), lists and
// dicts as their repr ("['a', 1]", "{'k': 'v'}"); Undefined prints as "". Throws mb::Error when
// the text would exceed `limit` bytes (a list can hold one long string many times).
std::string to_output(const Value& value, size_t limit = SIZE_MAX);
// repr(value): strings quoted the way Python chooses quotes.
std::string repr(const Value& value, size_t limit = SIZE_MAX);
// Python's repr of a float.
std::string float_repr(double d);

// Python's ==, where 1 == 1.0 == True and containers compare element-wise.
bool equal(const Value& a, const Value& b);

// UTF-8 helpers with Python's code point semantics; bytes that do not decode count as one each.
std::vector<std::string_view> code_points(std::string_view s);
size_t code_point_count(std::string_view s);

}  // namespace mb::chat

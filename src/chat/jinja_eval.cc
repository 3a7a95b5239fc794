// SPDX-License-Identifier: MIT
// The evaluator: statements and expressions with Jinja2's semantics under transformers'
// ImmutableSandboxedEnvironment (default Undefined, loop controls, no mutation of lists or dicts).
#include "chat/jinja_eval.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <unordered_map>

#include "core/error.h"

namespace mb::chat {

void fail_at(const std::string& problem, int line) {
  throw Error("chat template: " + problem + " at line " + std::to_string(line));
}

// All strings and lists built over a render may add up to this many times the output limit.
constexpr std::size_t kBudgetFactor = 8;

void Budget::charge(std::size_t amount, int line) {
  const std::size_t total = max_string_bytes_ * kBudgetFactor + (std::size_t{1} << 20);
  if (amount > total || used_ > total - amount) {
    fail_at("the template builds more than " + std::to_string(total) + " bytes of strings and lists", line);
  }
  used_ += amount;
}

void Budget::charge_string(std::size_t bytes, int line) {
  if (bytes > max_string_bytes_) {
    fail_at("a string grows past the output limit of " + std::to_string(max_string_bytes_) + " bytes", line);
  }
  charge(bytes, line);
}

void Budget::charge_list(std::size_t elements, int line) {
  if (elements > max_string_bytes_ / sizeof(Value)) fail_at("a list grows past the output limit", line);
  charge(elements * sizeof(Value), line);
}

const Value* CallArgs::get(size_t position, std::string_view name) const {
  if (position < positional.size()) return &positional[position];
  for (const auto& [key, value] : keyword) {
    if (key == name) return &value;
  }
  return nullptr;
}

void CallArgs::check(const char* what, size_t max_positional,
                     std::initializer_list<std::string_view> names) const {
  if (positional.size() > max_positional) {
    fail_at(std::string(what) + " takes at most " + std::to_string(max_positional) + " positional arguments",
            line);
  }
  for (const auto& entry : keyword) {
    if (std::find(names.begin(), names.end(), entry.first) == names.end()) {
      fail_at(std::string(what) + " got an unexpected keyword argument '" + entry.first + "'", line);
    }
  }
}

namespace {

using NodeList = std::vector<std::unique_ptr<Node>>;

// Evaluation recursion (blocks, expressions and macro calls together) stops here, well within
// the stack even with sanitizers' large frames.
constexpr int kMaxEvalDepth = 1500;

class Scope {
 public:
  explicit Scope(const Scope* parent) : parent_(parent) {}
  const Value* find(const std::string& name) const {
    for (const Scope* scope = this; scope != nullptr; scope = scope->parent_) {
      const auto it = scope->vars_.find(name);
      if (it != scope->vars_.end()) return &it->second;
    }
    return nullptr;
  }
  void set(const std::string& name, Value value) { vars_[name] = std::move(value); }

 private:
  const Scope* parent_;
  std::unordered_map<std::string, Value> vars_;
};

enum class Flow { Normal, Break, Continue };

[[noreturn]] void undefined_error(const Value& value, int line) {
  const std::string& hint = value.undefined_hint();
  fail_at(hint.empty() ? "use of an undefined value" : "'" + hint + "' is undefined", line);
}

bool as_number(const Value& v, double& d, int64_t& i, bool& is_int) {
  if (v.is_bool() || v.is_int()) {
    i = v.is_bool() ? v.as_bool() : v.as_int();
    d = static_cast<double>(i);
    is_int = true;
    return true;
  }
  if (v.is_float()) {
    d = v.as_float();
    is_int = false;
    return true;
  }
  return false;
}

class Evaluator {
 public:
  Evaluator(const DictData& variables, const RenderLimits& limits)
      : limits_(limits), budget_(limits.max_output_bytes), globals_(nullptr) {
    for (const auto& [name, value] : variables.entries) globals_.set(name, value);
    const auto builtin = [&](Callable::Kind kind, const char* name) {
      auto fn = std::make_shared<Callable>();
      fn->kind = kind;
      fn->name = name;
      globals_.set(name, Value::callable(std::move(fn)));
    };
    builtin(Callable::Kind::RaiseException, "raise_exception");
    builtin(Callable::Kind::Namespace, "namespace");
    builtin(Callable::Kind::Range, "range");
    builtin(Callable::Kind::Dict, "dict");
    builtin(Callable::Kind::StrftimeNow, "strftime_now");
  }

  // The template's top level runs in the global scope, so that macros (whose frames open on
  // it) see the template's variables and each other, as in Jinja.
  std::string run(const NodeList& nodes) {
    std::string out;
    exec(nodes, globals_, out);
    return out;
  }

 private:
  struct DepthGuard {
    DepthGuard(Evaluator& evaluator, int line) : evaluator_(evaluator) {
      if (++evaluator_.depth_ > kMaxEvalDepth) fail_at("evaluation nests too deeply", line);
    }
    ~DepthGuard() { --evaluator_.depth_; }
    Evaluator& evaluator_;
  };

  void append(std::string& out, std::string_view text, int line) {
    if (text.size() > limits_.max_output_bytes || out.size() > limits_.max_output_bytes - text.size()) {
      fail_at("the output exceeds " + std::to_string(limits_.max_output_bytes) + " bytes", line);
    }
    out += text;
  }

  void count_iteration(int line) {
    if (++iterations_ > limits_.max_loop_iterations) {
      fail_at("loops and macro calls run more than " + std::to_string(limits_.max_loop_iterations) + " times",
              line);
    }
  }

  Flow exec(const NodeList& nodes, Scope& scope, std::string& out) {
    for (const auto& node : nodes) {
      const Flow flow = exec_node(*node, scope, out);
      if (flow != Flow::Normal) return flow;
    }
    return Flow::Normal;
  }

  Flow exec_node(const Node& node, Scope& scope, std::string& out) {
    DepthGuard guard(*this, node.line);
    switch (node.type) {
      case NodeType::Text:
        append(out, node.text, node.line);
        return Flow::Normal;
      case NodeType::Output: {
        const Value value = eval(*node.expr, scope);
        append(out, to_output(value, limits_.max_output_bytes), node.line);
        return Flow::Normal;
      }
      case NodeType::If:
        return exec(truthy(eval(*node.expr, scope)) ? node.body : node.else_body, scope, out);
      case NodeType::For:
        return exec_for(node, scope, out);
      case NodeType::Set:
        exec_set(node, scope);
        return Flow::Normal;
      case NodeType::Macro: {
        auto fn = std::make_shared<Callable>();
        fn->kind = Callable::Kind::Macro;
        fn->macro = &node;
        fn->name = node.name;
        scope.set(node.name, Value::callable(std::move(fn)));
        return Flow::Normal;
      }
      case NodeType::Break:
        return Flow::Break;
      case NodeType::Continue:
        return Flow::Continue;
      case NodeType::Generation:
        return exec(node.body, scope, out);
    }
    return Flow::Normal;
  }

  std::vector<Value> iterate(const Value& value, int line) {
    if (value.is_undefined()) return {};
    if (value.is_list()) return value.items();
    std::vector<Value> out;
    if (value.is_dict()) {
      for (const auto& entry : value.dict_data().entries) out.push_back(Value::string(entry.first));
      return out;
    }
    if (value.is_string()) {
      for (std::string_view c : code_points(value.str())) out.push_back(Value::string(std::string(c)));
      budget_.charge_list(out.size(), line);
      return out;
    }
    fail_at("'" + std::string(value.type_name()) + "' object is not iterable", line);
  }

  void bind_targets(Scope& scope, const std::vector<std::string>& targets, const Value& value, int line) {
    if (targets.size() == 1) {
      scope.set(targets[0], value);
      return;
    }
    std::vector<Value> parts = iterate(value, line);
    if (parts.size() != targets.size()) {
      fail_at("cannot unpack " + std::to_string(parts.size()) + " values into " +
                  std::to_string(targets.size()) + " variables",
              line);
    }
    for (size_t i = 0; i < targets.size(); ++i) scope.set(targets[i], parts[i]);
  }

  Flow exec_for(const Node& node, Scope& scope, std::string& out) {
    std::vector<Value> items = iterate(eval(*node.expr, scope), node.line);
    if (node.filter) {
      std::vector<Value> kept;
      for (const Value& item : items) {
        count_iteration(node.line);
        Scope probe(&scope);
        bind_targets(probe, node.targets, item, node.line);
        if (truthy(eval(*node.filter, probe))) kept.push_back(item);
      }
      items = std::move(kept);
    }
    if (items.empty()) {
      Scope inner(&scope);
      // The else block is outside the loop: a break or continue in it belongs to an outer loop.
      return exec(node.else_body, inner, out);
    }
    const auto length = static_cast<int64_t>(items.size());
    for (int64_t i = 0; i < length; ++i) {
      count_iteration(node.line);
      Scope inner(&scope);
      bind_targets(inner, node.targets, items[static_cast<size_t>(i)], node.line);
      DictData loop;
      loop.set("index", Value::integer(i + 1));
      loop.set("index0", Value::integer(i));
      loop.set("revindex", Value::integer(length - i));
      loop.set("revindex0", Value::integer(length - i - 1));
      loop.set("first", Value::boolean(i == 0));
      loop.set("last", Value::boolean(i == length - 1));
      loop.set("length", Value::integer(length));
      loop.set("depth", Value::integer(1));
      loop.set("depth0", Value::integer(0));
      if (i > 0) loop.set("previtem", items[static_cast<size_t>(i - 1)]);
      if (i + 1 < length) loop.set("nextitem", items[static_cast<size_t>(i + 1)]);
      inner.set("loop", Value::dict(std::move(loop)));
      if (exec(node.body, inner, out) == Flow::Break) break;
    }
    return Flow::Normal;
  }

  void exec_set(const Node& node, Scope& scope) {
    Value value;
    if (node.expr) {
      value = eval(*node.expr, scope);
    } else {
      std::string captured;
      exec(node.body, scope, captured);
      value = budget_.string(std::move(captured), node.line);
    }
    if (!node.attribute.empty()) {
      const Value* target = scope.find(node.targets[0]);
      if (target == nullptr || !target->is_namespace()) {
        fail_at("cannot assign attribute '" + node.attribute + "' of '" + node.targets[0] +
                    "', which is not a namespace",
                node.line);
      }
      // A namespace inside a namespace could form a cycle; chat templates never need one.
      if (value.is_namespace()) fail_at("a namespace cannot hold another namespace", node.line);
      DictData& attributes = target->namespace_data().attributes;
      attributes.depth = std::max(attributes.depth, value.depth() + 1);
      if (attributes.depth > kMaxValueDepth)
        fail_at("lists and mappings nest deeper than " + std::to_string(kMaxValueDepth) + " levels",
                node.line);
      attributes.set(node.attribute, std::move(value));
      return;
    }
    bind_targets(scope, node.targets, value, node.line);
  }

  Value eval(const Expr& expr, Scope& scope) {
    DepthGuard guard(*this, expr.line);
    switch (expr.type) {
      case ExprType::Literal:
        return expr.literal;
      case ExprType::Name: {
        const Value* value = scope.find(expr.name);
        return value != nullptr ? *value : Value::undefined(expr.name);
      }
      case ExprType::List: {
        std::vector<Value> items;
        items.reserve(expr.args.size());
        for (const auto& arg : expr.args) items.push_back(checked_element(eval(*arg, scope), expr.line));
        return budget_.list(std::move(items), expr.line);
      }
      case ExprType::Dict: {
        DictData dict;
        for (size_t i = 0; i + 1 < expr.args.size(); i += 2) {
          const Value key = eval(*expr.args[i], scope);
          if (!key.is_string()) fail_at("mapping keys must be strings", expr.line);
          dict.set(key.str(), checked_element(eval(*expr.args[i + 1], scope), expr.line));
        }
        budget_.charge_list(dict.entries.size() * 2, expr.line);
        return Value::dict(std::move(dict));
      }
      case ExprType::Attribute: {
        const Value object = eval(*expr.args[0], scope);
        if (object.is_undefined()) undefined_error(object, expr.line);
        return get_attribute(object, expr.name, expr.line);
      }
      case ExprType::Subscript:
        return subscript(eval(*expr.args[0], scope), eval(*expr.args[1], scope), expr.line);
      case ExprType::Slice:
        return slice(expr, scope);
      case ExprType::Call:
        return call(expr, scope);
      case ExprType::Filter: {
        const Value operand = eval(*expr.args[0], scope);
        return apply_filter(expr.name, operand, collect_args(expr, scope), budget_);
      }
      case ExprType::Test: {
        const Value operand = eval(*expr.args[0], scope);
        return Value::boolean(apply_test(expr.name, operand, collect_args(expr, scope)) != expr.negated);
      }
      case ExprType::Unary:
        return unary(expr, scope);
      case ExprType::Binary:
        return binary(expr, scope);
      case ExprType::Compare:
        return compare(expr, scope);
      case ExprType::Conditional:
        if (truthy(eval(*expr.args[0], scope))) return eval(*expr.args[1], scope);
        return expr.args[2] ? eval(*expr.args[2], scope) : Value::undefined();
    }
    return Value::undefined();
  }

  static Value checked_element(Value value, int line) {
    // Keeping namespaces out of containers keeps every value acyclic.
    if (value.is_namespace()) fail_at("a namespace cannot be stored in a list or mapping", line);
    return value;
  }

  CallArgs collect_args(const Expr& expr, Scope& scope) {
    CallArgs args;
    args.line = expr.line;
    for (size_t i = 1; i < expr.args.size(); ++i) {
      Value value = eval(*expr.args[i], scope);
      if (expr.arg_names[i].empty()) {
        args.positional.push_back(std::move(value));
      } else {
        args.keyword.emplace_back(expr.arg_names[i], std::move(value));
      }
    }
    return args;
  }

  Value subscript(const Value& object, const Value& key, int line) {
    if (object.is_undefined()) undefined_error(object, line);
    if (object.is_dict() || object.is_namespace()) {
      if (!key.is_string()) return Value::undefined();
      return get_attribute(object, key.str(), line);
    }
    if ((object.is_list() || object.is_string()) && (key.is_int() || key.is_bool())) {
      int64_t index = key.is_bool() ? key.as_bool() : key.as_int();
      if (object.is_list()) {
        const auto size = static_cast<int64_t>(object.items().size());
        if (index < 0) index += size;
        if (index < 0 || index >= size) return Value::undefined("list index out of range");
        return object.items()[static_cast<size_t>(index)];
      }
      const auto chars = code_points(object.str());
      const auto size = static_cast<int64_t>(chars.size());
      if (index < 0) index += size;
      if (index < 0 || index >= size) return Value::undefined("string index out of range");
      return Value::string(std::string(chars[static_cast<size_t>(index)]));
    }
    if (key.is_string()) return get_attribute(object, key.str(), line);
    return Value::undefined();
  }

  Value slice(const Expr& expr, Scope& scope) {
    const Value object = eval(*expr.args[0], scope);
    if (object.is_undefined()) undefined_error(object, expr.line);
    int64_t bounds[3] = {0, 0, 1};
    bool given[3] = {false, false, false};
    for (int k = 0; k < 3; ++k) {
      if (!expr.args[static_cast<size_t>(k) + 1]) continue;
      const Value v = eval(*expr.args[static_cast<size_t>(k) + 1], scope);
      if (v.is_none()) continue;
      if (!v.is_int() && !v.is_bool()) fail_at("slice indices must be integers or none", expr.line);
      bounds[k] = v.is_bool() ? v.as_bool() : v.as_int();
      given[k] = true;
    }
    const int64_t step = bounds[2];
    if (step == 0) fail_at("slice step cannot be zero", expr.line);
    std::vector<std::string_view> chars;
    int64_t size = 0;
    if (object.is_list()) {
      size = static_cast<int64_t>(object.items().size());
    } else if (object.is_string()) {
      chars = code_points(object.str());
      size = static_cast<int64_t>(chars.size());
    } else {
      fail_at("'" + std::string(object.type_name()) + "' object cannot be sliced", expr.line);
    }
    // Python's slice.indices().
    const auto clamp = [&](int64_t value, bool is_given, int64_t fallback) {
      if (!is_given) return fallback;
      if (value < 0) value = std::max<int64_t>(value + size, step < 0 ? -1 : 0);
      return std::min<int64_t>(value, step < 0 ? size - 1 : size);
    };
    const int64_t start = clamp(bounds[0], given[0], step < 0 ? size - 1 : 0);
    const int64_t stop = clamp(bounds[1], given[1], step < 0 ? -1 : size);
    std::vector<Value> items;
    std::string text;
    for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) {
      if (object.is_list()) {
        items.push_back(object.items()[static_cast<size_t>(i)]);
      } else {
        text += chars[static_cast<size_t>(i)];
      }
    }
    if (object.is_list()) return budget_.list(std::move(items), expr.line);
    return budget_.string(std::move(text), expr.line);
  }

  Value call(const Expr& expr, Scope& scope) {
    const Expr& callee = *expr.args[0];
    if (callee.type == ExprType::Attribute) {
      const Value object = eval(*callee.args[0], scope);
      if (object.is_undefined()) undefined_error(object, expr.line);
      if (object.is_dict() || object.is_string() || object.is_list()) {
        return call_method(object, callee.name, collect_args(expr, scope), budget_);
      }
      const Value member = get_attribute(object, callee.name, expr.line);
      if (!member.is_callable()) {
        fail_at("unsupported method '" + callee.name + "' on " + object.type_name(), expr.line);
      }
      return call_value(member, collect_args(expr, scope), expr.line);
    }
    const Value fn = eval(callee, scope);
    if (fn.is_undefined()) undefined_error(fn, expr.line);
    if (!fn.is_callable()) fail_at("'" + std::string(fn.type_name()) + "' object is not callable", expr.line);
    return call_value(fn, collect_args(expr, scope), expr.line);
  }

  Value call_value(const Value& fn, const CallArgs& args, int line) {
    const Callable& callable = fn.callable_data();
    switch (callable.kind) {
      case Callable::Kind::RaiseException: {
        const Value* message = args.get(0, "message");
        throw Error("chat template: raise_exception: " +
                    (message ? to_output(*message, 4096) : std::string()));
      }
      case Callable::Kind::Namespace: {
        auto data = std::make_shared<NamespaceData>();
        if (!args.positional.empty()) {
          if (!args.positional[0].is_dict() || args.positional.size() > 1) {
            fail_at("namespace() takes keyword arguments or one mapping", line);
          }
          for (const auto& [key, value] : args.positional[0].dict_data().entries)
            data->attributes.set(key, value);
        }
        for (const auto& [key, value] : args.keyword) {
          data->attributes.set(key, checked_element(value, line));
          data->attributes.depth = std::max(data->attributes.depth, value.depth() + 1);
        }
        return Value::ns(std::move(data));
      }
      case Callable::Kind::Range:
        return range(args, line);
      case Callable::Kind::Dict: {
        DictData dict;
        for (const auto& [key, value] : args.keyword) dict.set(key, checked_element(value, line));
        return Value::dict(std::move(dict));
      }
      case Callable::Kind::StrftimeNow: {
        const Value* format = args.get(0, "format");
        if (format == nullptr || !format->is_string()) fail_at("strftime_now() needs a format string", line);
        return budget_.string(strftime_now(format->str(), limits_.now_unix_seconds, line), line);
      }
      case Callable::Kind::Macro:
        return call_macro(*static_cast<const Node*>(callable.macro), args, line);
    }
    return Value::undefined();
  }

  Value range(const CallArgs& args, int line) {
    args.check("range()", 3, {});
    int64_t values[3] = {0, 0, 1};
    for (size_t i = 0; i < args.positional.size(); ++i) {
      if (!args.positional[i].is_int()) fail_at("range() arguments must be integers", line);
      values[i] = args.positional[i].as_int();
    }
    if (args.positional.empty()) fail_at("range() needs at least one argument", line);
    int64_t start = 0;
    int64_t stop = values[0];
    int64_t step = 1;
    if (args.positional.size() >= 2) {
      start = values[0];
      stop = values[1];
      step = values[2];
    }
    if (step == 0) fail_at("range() step cannot be zero", line);
    std::vector<Value> items;
    for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) {
      if (static_cast<int64_t>(items.size()) >= limits_.max_loop_iterations) {
        fail_at("range() is longer than the loop iteration limit", line);
      }
      items.push_back(Value::integer(i));
      if ((step > 0 && i > std::numeric_limits<int64_t>::max() - step) ||
          (step < 0 && i < std::numeric_limits<int64_t>::min() - step)) {
        break;
      }
    }
    return budget_.list(std::move(items), line);
  }

  Value call_macro(const Node& macro, const CallArgs& args, int line) {
    count_iteration(line);
    if (++macro_depth_ > limits_.max_recursion_depth) {
      fail_at("macro calls nest deeper than " + std::to_string(limits_.max_recursion_depth) + " levels",
              line);
    }
    if (args.positional.size() > macro.params.size()) {
      fail_at(
          "macro '" + macro.name + "' takes at most " + std::to_string(macro.params.size()) + " arguments",
          line);
    }
    Scope frame(&globals_);
    for (size_t i = 0; i < macro.params.size(); ++i) {
      const Value* given = args.get(i, macro.params[i]);
      if (given != nullptr) {
        frame.set(macro.params[i], *given);
      } else if (macro.defaults[i]) {
        frame.set(macro.params[i], eval(*macro.defaults[i], frame));
      } else {
        frame.set(macro.params[i], Value::undefined(macro.params[i]));
      }
    }
    for (const auto& entry : args.keyword) {
      if (std::find(macro.params.begin(), macro.params.end(), entry.first) == macro.params.end()) {
        fail_at("macro '" + macro.name + "' has no parameter '" + entry.first + "'", line);
      }
    }
    std::string out;
    exec(macro.body, frame, out);
    --macro_depth_;
    return budget_.string(std::move(out), line);
  }

  Value unary(const Expr& expr, Scope& scope) {
    const Value operand = eval(*expr.args[0], scope);
    if (expr.name == "not") return Value::boolean(!truthy(operand));
    double d = 0;
    int64_t i = 0;
    bool is_int = false;
    if (!as_number(operand, d, i, is_int)) {
      if (operand.is_undefined()) undefined_error(operand, expr.line);
      fail_at("bad operand type for unary " + expr.name + ": '" + operand.type_name() + "'", expr.line);
    }
    if (expr.name == "+") return is_int ? Value::integer(i) : Value::floating(d);
    if (is_int) {
      if (i == std::numeric_limits<int64_t>::min()) fail_at("integer overflow", expr.line);
      return Value::integer(-i);
    }
    return Value::floating(-d);
  }

  Value binary(const Expr& expr, Scope& scope) {
    const std::string& op = expr.name;
    if (op == "and" || op == "or") {
      Value left = eval(*expr.args[0], scope);
      if (truthy(left) == (op == "or")) return left;
      return eval(*expr.args[1], scope);
    }
    const Value a = eval(*expr.args[0], scope);
    const Value b = eval(*expr.args[1], scope);
    if (op == "~") {
      const size_t limit = limits_.max_output_bytes;
      std::string text = to_output(a, limit);
      const std::string right = to_output(b, limit);
      budget_.charge_string(text.size() + right.size(), expr.line);
      return Value::string(text + right);
    }
    if (a.is_undefined()) undefined_error(a, expr.line);
    if (b.is_undefined()) undefined_error(b, expr.line);
    if (op == "+" && a.is_string() && b.is_string()) {
      budget_.charge_string(a.str().size() + b.str().size(), expr.line);
      return Value::string(a.str() + b.str());
    }
    if (op == "+" && a.is_list() && b.is_list()) {
      std::vector<Value> items = a.items();
      items.insert(items.end(), b.items().begin(), b.items().end());
      return budget_.list(std::move(items), expr.line);
    }
    if (op == "*" && (a.is_string() || a.is_list() || b.is_string() || b.is_list()))
      return repeat(a, b, expr.line);
    double x = 0, y = 0;
    int64_t i = 0, j = 0;
    bool x_int = false, y_int = false;
    if (!as_number(a, x, i, x_int) || !as_number(b, y, j, y_int)) {
      fail_at("unsupported operand types for " + op + ": '" + a.type_name() + "' and '" + b.type_name() + "'",
              expr.line);
    }
    return arithmetic(op, x, y, i, j, x_int && y_int, expr.line);
  }

  Value repeat(const Value& a, const Value& b, int line) {
    const Value& sequence = a.is_string() || a.is_list() ? a : b;
    const Value& count_value = a.is_string() || a.is_list() ? b : a;
    if (!count_value.is_int() && !count_value.is_bool()) {
      fail_at("can't multiply sequence by non-int of type '" + std::string(count_value.type_name()) + "'",
              line);
    }
    const int64_t count =
        std::max<int64_t>(0, count_value.is_bool() ? count_value.as_bool() : count_value.as_int());
    if (sequence.is_string()) {
      const size_t size = sequence.str().size();
      if (size > 0 && static_cast<uint64_t>(count) > budget_.max_string_bytes() / size) {
        fail_at("a string grows past the output limit", line);
      }
      budget_.charge_string(size * static_cast<size_t>(count), line);
      std::string out;
      out.reserve(size * static_cast<size_t>(count));
      for (int64_t k = 0; k < count; ++k) out += sequence.str();
      return Value::string(std::move(out));
    }
    const size_t size = sequence.items().size();
    if (size > 0 && static_cast<uint64_t>(count) > budget_.max_string_bytes() / size) {
      fail_at("a list grows past the output limit", line);
    }
    budget_.charge_list(size * static_cast<size_t>(count), line);
    std::vector<Value> items;
    for (int64_t k = 0; k < count; ++k)
      items.insert(items.end(), sequence.items().begin(), sequence.items().end());
    return Value::list(std::move(items));
  }

  static Value arithmetic(const std::string& op, double x, double y, int64_t i, int64_t j, bool ints,
                          int line) {
    int64_t r = 0;
    if (op == "+") {
      if (!ints) return Value::floating(x + y);
      if (__builtin_add_overflow(i, j, &r)) fail_at("integer overflow", line);
      return Value::integer(r);
    }
    if (op == "-") {
      if (!ints) return Value::floating(x - y);
      if (__builtin_sub_overflow(i, j, &r)) fail_at("integer overflow", line);
      return Value::integer(r);
    }
    if (op == "*") {
      if (!ints) return Value::floating(x * y);
      if (__builtin_mul_overflow(i, j, &r)) fail_at("integer overflow", line);
      return Value::integer(r);
    }
    if (op == "/") {
      if (y == 0) fail_at("division by zero", line);
      return Value::floating(x / y);
    }
    if (op == "//" || op == "%") {
      if (y == 0) fail_at(op == "//" ? "integer division by zero" : "modulo by zero", line);
      if (ints) {
        if (i == std::numeric_limits<int64_t>::min() && j == -1) fail_at("integer overflow", line);
        int64_t q = i / j;
        int64_t m = i % j;
        // Python rounds toward negative infinity; the remainder takes the divisor's sign.
        if (m != 0 && ((m < 0) != (j < 0))) {
          --q;
          m += j;
        }
        return Value::integer(op == "//" ? q : m);
      }
      const double q = std::floor(x / y);
      if (op == "//") return Value::floating(q);
      double m = std::fmod(x, y);
      if (m != 0 && ((m < 0) != (y < 0))) m += y;
      return Value::floating(m);
    }
    // "**"
    if (ints && j >= 0) {
      int64_t result = 1;
      for (int64_t k = 0; k < j; ++k) {
        if (__builtin_mul_overflow(result, i, &result)) fail_at("integer overflow", line);
        if (result == 0 || result == 1) break;
      }
      return Value::integer(result);
    }
    return Value::floating(std::pow(x, y));
  }

  static int order(const Value& a, const Value& b, const std::string& op, int line) {
    double x = 0, y = 0;
    int64_t i = 0, j = 0;
    bool x_int = false, y_int = false;
    if (as_number(a, x, i, x_int) && as_number(b, y, j, y_int)) {
      if (x_int && y_int) return i < j ? -1 : i > j ? 1 : 0;
      return x < y ? -1 : x > y ? 1 : 0;
    }
    if (a.is_string() && b.is_string()) return a.str().compare(b.str()) < 0 ? -1 : a.str() == b.str() ? 0 : 1;
    if (a.is_list() && b.is_list()) {
      const auto& p = a.items();
      const auto& q = b.items();
      for (size_t k = 0; k < std::min(p.size(), q.size()); ++k) {
        if (!equal(p[k], q[k])) return order(p[k], q[k], op, line);
      }
      return p.size() < q.size() ? -1 : p.size() > q.size() ? 1 : 0;
    }
    fail_at("'" + op + "' not supported between '" + a.type_name() + "' and '" + b.type_name() + "'", line);
  }

  static bool contains(const Value& container, const Value& item, int line) {
    if (container.is_undefined()) return false;
    if (container.is_string()) {
      if (!item.is_string()) fail_at("'in <string>' requires a string as left operand", line);
      return container.str().find(item.str()) != std::string::npos;
    }
    if (container.is_list()) {
      return std::any_of(container.items().begin(), container.items().end(),
                         [&](const Value& v) { return equal(v, item); });
    }
    if (container.is_dict()) return item.is_string() && container.dict_data().find(item.str()) != nullptr;
    fail_at("argument of type '" + std::string(container.type_name()) + "' is not iterable", line);
  }

  Value compare(const Expr& expr, Scope& scope) {
    Value left = eval(*expr.args[0], scope);
    for (size_t k = 0; k < expr.ops.size(); ++k) {
      Value right = eval(*expr.args[k + 1], scope);
      const std::string& op = expr.ops[k];
      bool result = false;
      if (op == "==") {
        result = equal(left, right);
      } else if (op == "!=") {
        result = !equal(left, right);
      } else if (op == "in" || op == "not in") {
        result = contains(right, left, expr.line) == (op == "in");
      } else {
        if (left.is_undefined()) undefined_error(left, expr.line);
        if (right.is_undefined()) undefined_error(right, expr.line);
        const int c = order(left, right, op, expr.line);
        result = op == "<" ? c < 0 : op == ">" ? c > 0 : op == "<=" ? c <= 0 : c >= 0;
      }
      if (!result) return Value::boolean(false);
      left = std::move(right);
    }
    return Value::boolean(true);
  }

  const RenderLimits& limits_;
  Budget budget_;
  Scope globals_;
  int depth_ = 0;
  int macro_depth_ = 0;
  int64_t iterations_ = 0;
};

}  // namespace

std::string render_nodes(const std::vector<std::unique_ptr<Node>>& nodes, const DictData& variables,
                         const RenderLimits& limits) {
  return Evaluator(variables, limits).run(nodes);
}

}  // namespace mb::chat

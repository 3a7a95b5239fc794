// SPDX-License-Identifier: MIT
// The syntax tree of a parsed chat template, and the lexer's tokens it is parsed from.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "chat/jinja_value.h"

namespace mb::chat {

enum class TokenType {
  Text,        // template data between tags, whitespace control already applied
  VarBegin,    // {{
  VarEnd,      // }}
  BlockBegin,  // {%
  BlockEnd,    // %}
  Name,
  String,  // value holds the unescaped text
  Integer,
  Float,
  Operator,  // value holds the operator: "==", "(", "|", ...
  Eof,
};

struct Token {
  TokenType type;
  std::string value;
  int line;
};

// Splits `source` into tokens as Jinja2 configured like transformers does (trim_blocks and
// lstrip_blocks on, keep_trailing_newline off, "\r\n" and "\r" read as "\n"). Throws mb::Error
// for unterminated tags, strings and comments, naming the line.
std::vector<Token> tokenize(std::string_view source);

enum class ExprType {
  Literal,      // literal
  Name,         // name
  List,         // args: the items (tuples are lists)
  Dict,         // args: key, value, key, value, ...
  Attribute,    // args[0].name
  Subscript,    // args[0][args[1]]
  Slice,        // args[0][args[1]:args[2]:args[3]], absent parts are null
  Call,         // args[0](args[1..]); arg_names[i] names keyword arguments ("" for positional)
  Filter,       // args[0] | name(args[1..])
  Test,         // args[0] is [not] name(args[1..]); negated
  Unary,        // name ("-", "+", "not") applied to args[0]
  Binary,       // args[0] name args[1], name one of + - * / // % ** ~ and or
  Compare,      // args[0] ops[0] args[1] ops[1] args[2] ..., chained as in Python
  Conditional,  // args[1] if args[0] else args[2] (args[2] null when there is no else)
};

struct Expr {
  ExprType type;
  int line = 0;
  Value literal;
  std::string name;
  std::vector<std::unique_ptr<Expr>> args;
  std::vector<std::string> arg_names;  // Call, Filter, Test: parallel to args (args[0] unnamed)
  std::vector<std::string> ops;        // Compare
  bool negated = false;                // Test
  int height = 1;                      // 1 + the tallest child: bounds recursion over the tree
};

enum class NodeType {
  Text,    // text
  Output,  // {{ expr }}
  If,      // if expr: body else else_body (an elif is an If alone in else_body)
  For,     // for targets in expr [if filter]: body else else_body
  Set,     // set targets = expr, or set targets[0].attribute = expr, or a set block (body)
  Macro,   // macro name(params = defaults): body
  Break,
  Continue,
  Generation,  // {% generation %}: transformers' assistant-mask marker, renders its body
};

struct Node {
  NodeType type;
  int line = 0;
  std::string text;
  std::unique_ptr<Expr> expr;
  std::unique_ptr<Expr> filter;
  std::vector<std::string> targets;
  std::string attribute;  // Set: "ns.attribute = ..." assigns this attribute of targets[0]
  std::vector<std::unique_ptr<Node>> body;
  std::vector<std::unique_ptr<Node>> else_body;
  std::string name;                             // Macro
  std::vector<std::string> params;              // Macro
  std::vector<std::unique_ptr<Expr>> defaults;  // Macro: parallel to params, null when none
};

// Parsing limits: how deeply expressions and blocks may nest. Real templates stay far below;
// the bound keeps the recursive-descent parser and the evaluator off the end of the stack.
inline constexpr int kMaxSyntaxDepth = 100;
// Chains such as `a + b + c ...` or `x|trim|trim ...` grow the tree without nesting in the source;
// an expression tree taller than this is refused too.
inline constexpr int kMaxExprHeight = 300;

// Parses a whole template; throws mb::Error "chat template: <problem> at line N" for syntax it
// does not support or that is malformed, and for unknown filters and tests (as Jinja2 does when it
// compiles a template).
std::vector<std::unique_ptr<Node>> parse_template(std::string_view source);

// Whether name is a filter or a test this implementation provides.
bool is_known_filter(std::string_view name);
bool is_known_test(std::string_view name);

}  // namespace mb::chat

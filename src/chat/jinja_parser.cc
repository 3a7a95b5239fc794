// SPDX-License-Identifier: MIT
// The parser: tokens into the syntax tree, by recursive descent following Jinja2's own grammar
// (jinja2/parser.py), so that operators bind the same way: `a + b | trim` filters b alone, `not a in
// b` negates the membership, `x if c` without else yields Undefined.
#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <initializer_list>

#include "chat/jinja_ast.h"
#include "core/error.h"

namespace mb::chat {

namespace {

using ExprPtr = std::unique_ptr<Expr>;
using NodeList = std::vector<std::unique_ptr<Node>>;

[[noreturn]] void fail(const std::string& problem, int line) {
  throw Error("chat template: " + problem + " at line " + std::to_string(line));
}

std::string describe(const Token& token) {
  switch (token.type) {
    case TokenType::Text:
      return "text";
    case TokenType::VarBegin:
      return "'{{'";
    case TokenType::VarEnd:
      return "'}}'";
    case TokenType::BlockBegin:
      return "'{%'";
    case TokenType::BlockEnd:
      return "'%}'";
    case TokenType::Eof:
      return "the end of the template";
    case TokenType::String:
      return "a string";
    default:
      return "'" + token.value + "'";
  }
}

ExprPtr make(ExprType type, int line) {
  auto expr = std::make_unique<Expr>();
  expr->type = type;
  expr->line = line;
  return expr;
}

// Records the height of a node whose children are complete, refusing trees too tall to walk.
ExprPtr grow(ExprPtr expr) {
  int tallest = 0;
  for (const auto& arg : expr->args) {
    if (arg) tallest = std::max(tallest, arg->height);
  }
  expr->height = tallest + 1;
  if (expr->height > kMaxExprHeight) {
    fail("an expression is more than " + std::to_string(kMaxExprHeight) + " operations deep", expr->line);
  }
  return expr;
}

class Parser {
 public:
  explicit Parser(std::vector<Token> tokens) : tokens_(std::move(tokens)) {}

  NodeList parse() {
    std::string found;
    NodeList nodes = parse_nodes({}, found, 0);
    return nodes;
  }

 private:
  // Counts nesting on the way down so that hostile input cannot exhaust the stack.
  struct DepthGuard {
    explicit DepthGuard(Parser& parser) : parser_(parser) {
      if (++parser_.depth_ > kMaxSyntaxDepth) {
        fail("expressions or blocks nest deeper than " + std::to_string(kMaxSyntaxDepth) + " levels",
             parser_.peek().line);
      }
    }
    ~DepthGuard() { --parser_.depth_; }
    Parser& parser_;
  };

  const Token& peek(size_t ahead = 0) const {
    const size_t index = std::min(pos_ + ahead, tokens_.size() - 1);
    return tokens_[index];
  }
  const Token& next() {
    const Token& token = tokens_[pos_];
    if (pos_ + 1 < tokens_.size()) ++pos_;
    return token;
  }
  bool at_operator(std::string_view op, size_t ahead = 0) const {
    return peek(ahead).type == TokenType::Operator && peek(ahead).value == op;
  }
  bool at_name(std::string_view name, size_t ahead = 0) const {
    return peek(ahead).type == TokenType::Name && peek(ahead).value == name;
  }
  void expect_operator(std::string_view op) {
    if (!at_operator(op))
      fail("expected '" + std::string(op) + "' but found " + describe(peek()), peek().line);
    next();
  }
  void expect(TokenType type, const char* what) {
    if (peek().type != type)
      fail(std::string("expected ") + what + " but found " + describe(peek()), peek().line);
    next();
  }
  std::string expect_name(const char* what) {
    if (peek().type != TokenType::Name)
      fail(std::string("expected ") + what + " but found " + describe(peek()), peek().line);
    return next().value;
  }

  // Parses nodes until a block tag whose keyword is in `terminators` (consumed with its "{%" and
  // keyword; the caller parses the rest of that tag), or the end of the template when none.
  NodeList parse_nodes(std::initializer_list<std::string_view> terminators, std::string& found,
                       int opened_at) {
    DepthGuard guard(*this);
    NodeList nodes;
    while (true) {
      const Token& token = peek();
      if (token.type == TokenType::Eof) {
        if (terminators.size() == 0) return nodes;
        std::string_view closer = *terminators.begin();
        for (std::string_view terminator : terminators) {
          if (terminator.rfind("end", 0) == 0) closer = terminator;
        }
        fail("missing '{% " + std::string(closer) + " %}' for the block opened", opened_at);
      }
      if (token.type == TokenType::Text) {
        auto node = std::make_unique<Node>();
        node->type = NodeType::Text;
        node->line = token.line;
        node->text = next().value;
        nodes.push_back(std::move(node));
        continue;
      }
      if (token.type == TokenType::VarBegin) {
        next();
        auto node = std::make_unique<Node>();
        node->type = NodeType::Output;
        node->line = token.line;
        node->expr = parse_expression();
        expect(TokenType::VarEnd, "'}}'");
        nodes.push_back(std::move(node));
        continue;
      }
      if (token.type != TokenType::BlockBegin) fail("unexpected " + describe(token), token.line);
      next();
      const int line = peek().line;
      const std::string keyword = expect_name("a tag name");
      for (std::string_view terminator : terminators) {
        if (keyword == terminator) {
          found = keyword;
          return nodes;
        }
      }
      nodes.push_back(parse_statement(keyword, line));
    }
  }

  std::unique_ptr<Node> parse_statement(const std::string& keyword, int line) {
    auto node = std::make_unique<Node>();
    node->line = line;
    if (keyword == "if") return parse_if(std::move(node));
    if (keyword == "for") return parse_for(std::move(node));
    if (keyword == "set") return parse_set(std::move(node));
    if (keyword == "macro") return parse_macro(std::move(node));
    if (keyword == "break" || keyword == "continue") {
      if (loop_depth_ == 0) fail("'" + keyword + "' outside a loop", line);
      node->type = keyword == "break" ? NodeType::Break : NodeType::Continue;
      expect(TokenType::BlockEnd, "'%}'");
      return node;
    }
    if (keyword == "generation") {
      node->type = NodeType::Generation;
      expect(TokenType::BlockEnd, "'%}'");
      std::string found;
      node->body = parse_nodes({"endgeneration"}, found, line);
      expect(TokenType::BlockEnd, "'%}'");
      return node;
    }
    static const char* const kUnsupported[] = {"include", "import", "from", "extends",    "block", "call",
                                               "filter",  "with",   "do",   "autoescape", "trans", "raw"};
    for (const char* name : kUnsupported) {
      if (keyword == name) fail("unsupported tag '" + keyword + "'", line);
    }
    if (keyword.rfind("end", 0) == 0 || keyword == "elif" || keyword == "else") {
      fail("unexpected '" + keyword + "'", line);
    }
    fail("unknown tag '" + keyword + "'", line);
  }

  std::unique_ptr<Node> parse_if(std::unique_ptr<Node> node) {
    node->type = NodeType::If;
    node->expr = parse_expression();
    expect(TokenType::BlockEnd, "'%}'");
    std::string found;
    node->body = parse_nodes({"elif", "else", "endif"}, found, node->line);
    if (found == "elif") {
      auto elif = std::make_unique<Node>();
      elif->line = peek().line;
      DepthGuard guard(*this);
      node->else_body.push_back(parse_if(std::move(elif)));
      return node;
    }
    if (found == "else") {
      expect(TokenType::BlockEnd, "'%}'");
      node->else_body = parse_nodes({"endif"}, found, node->line);
    }
    expect(TokenType::BlockEnd, "'%}'");
    return node;
  }

  std::unique_ptr<Node> parse_for(std::unique_ptr<Node> node) {
    node->type = NodeType::For;
    const bool parenthesized = at_operator("(");
    if (parenthesized) next();
    node->targets.push_back(expect_name("a loop variable"));
    while (at_operator(",")) {
      next();
      node->targets.push_back(expect_name("a loop variable"));
    }
    if (parenthesized) expect_operator(")");
    if (!at_name("in")) fail("expected 'in' but found " + describe(peek()), peek().line);
    next();
    node->expr = parse_expression(false);
    if (at_name("if")) {
      next();
      node->filter = parse_expression();
    }
    if (at_name("recursive")) fail("unsupported recursive loop", peek().line);
    expect(TokenType::BlockEnd, "'%}'");
    std::string found;
    ++loop_depth_;
    node->body = parse_nodes({"else", "endfor"}, found, node->line);
    --loop_depth_;
    if (found == "else") {
      expect(TokenType::BlockEnd, "'%}'");
      node->else_body = parse_nodes({"endfor"}, found, node->line);
    }
    expect(TokenType::BlockEnd, "'%}'");
    return node;
  }

  std::unique_ptr<Node> parse_set(std::unique_ptr<Node> node) {
    node->type = NodeType::Set;
    node->targets.push_back(expect_name("a variable name"));
    if (at_operator(".")) {
      next();
      node->attribute = expect_name("an attribute name");
    } else {
      while (at_operator(",")) {
        next();
        node->targets.push_back(expect_name("a variable name"));
      }
    }
    if (at_operator("=")) {
      next();
      node->expr = parse_tuple_expression();
      expect(TokenType::BlockEnd, "'%}'");
      return node;
    }
    if (at_operator("|")) fail("unsupported filtered set block", peek().line);
    if (node->targets.size() != 1 || !node->attribute.empty())
      fail("a set block assigns one variable", node->line);
    expect(TokenType::BlockEnd, "'%}'");
    std::string found;
    node->body = parse_nodes({"endset"}, found, node->line);
    expect(TokenType::BlockEnd, "'%}'");
    return node;
  }

  std::unique_ptr<Node> parse_macro(std::unique_ptr<Node> node) {
    node->type = NodeType::Macro;
    node->name = expect_name("a macro name");
    expect_operator("(");
    while (!at_operator(")")) {
      node->params.push_back(expect_name("a parameter name"));
      if (at_operator("=")) {
        next();
        node->defaults.push_back(parse_expression());
      } else {
        node->defaults.push_back(nullptr);
      }
      if (!at_operator(",")) break;
      next();
    }
    expect_operator(")");
    expect(TokenType::BlockEnd, "'%}'");
    std::string found;
    const int saved_loops = loop_depth_;
    loop_depth_ = 0;
    node->body = parse_nodes({"endmacro"}, found, node->line);
    loop_depth_ = saved_loops;
    expect(TokenType::BlockEnd, "'%}'");
    return node;
  }

  // `a, b` after `set x =` builds a tuple, as in Python.
  ExprPtr parse_tuple_expression() {
    ExprPtr first = parse_expression();
    if (!at_operator(",")) return first;
    auto tuple = make(ExprType::List, first->line);
    tuple->args.push_back(std::move(first));
    while (at_operator(",")) {
      next();
      if (peek().type == TokenType::BlockEnd) break;
      tuple->args.push_back(parse_expression());
    }
    return grow(std::move(tuple));
  }

  ExprPtr parse_expression(bool allow_conditional = true) {
    DepthGuard guard(*this);
    ExprPtr value = parse_or();
    while (allow_conditional && at_name("if")) {
      const int line = next().line;
      auto conditional = make(ExprType::Conditional, line);
      conditional->args.push_back(parse_or());
      conditional->args.push_back(std::move(value));
      if (at_name("else")) {
        next();
        conditional->args.push_back(parse_expression());
      } else {
        conditional->args.push_back(nullptr);
      }
      value = grow(std::move(conditional));
    }
    return value;
  }

  ExprPtr binary(const char* op, ExprPtr left, ExprPtr right, int line) {
    auto expr = make(ExprType::Binary, line);
    expr->name = op;
    expr->args.push_back(std::move(left));
    expr->args.push_back(std::move(right));
    return grow(std::move(expr));
  }

  ExprPtr parse_or() {
    ExprPtr left = parse_and();
    while (at_name("or")) {
      const int line = next().line;
      left = binary("or", std::move(left), parse_and(), line);
    }
    return left;
  }

  ExprPtr parse_and() {
    ExprPtr left = parse_not();
    while (at_name("and")) {
      const int line = next().line;
      left = binary("and", std::move(left), parse_not(), line);
    }
    return left;
  }

  ExprPtr parse_not() {
    if (at_name("not")) {
      DepthGuard guard(*this);
      auto expr = make(ExprType::Unary, next().line);
      expr->name = "not";
      expr->args.push_back(parse_not());
      return grow(std::move(expr));
    }
    return parse_compare();
  }

  ExprPtr parse_compare() {
    ExprPtr first = parse_math1();
    ExprPtr compare;
    while (true) {
      std::string op;
      if (peek().type == TokenType::Operator &&
          (peek().value == "==" || peek().value == "!=" || peek().value == "<" || peek().value == ">" ||
           peek().value == "<=" || peek().value == ">=")) {
        op = next().value;
      } else if (at_name("in")) {
        next();
        op = "in";
      } else if (at_name("not") && at_name("in", 1)) {
        next();
        next();
        op = "not in";
      } else {
        break;
      }
      if (!compare) {
        compare = make(ExprType::Compare, first->line);
        compare->args.push_back(std::move(first));
      }
      compare->ops.push_back(op);
      compare->args.push_back(parse_math1());
    }
    return compare ? grow(std::move(compare)) : std::move(first);
  }

  ExprPtr parse_math1() {
    ExprPtr left = parse_concat();
    while (at_operator("+") || at_operator("-")) {
      const Token& op = next();
      const char* symbol = op.value == "+" ? "+" : "-";
      left = binary(symbol, std::move(left), parse_concat(), op.line);
    }
    return left;
  }

  ExprPtr parse_concat() {
    ExprPtr left = parse_math2();
    while (at_operator("~")) {
      const int line = next().line;
      left = binary("~", std::move(left), parse_math2(), line);
    }
    return left;
  }

  ExprPtr parse_math2() {
    ExprPtr left = parse_pow();
    while (at_operator("*") || at_operator("/") || at_operator("//") || at_operator("%")) {
      const Token& op = next();
      static const char* const kOps[] = {"*", "/", "//", "%"};
      const char* symbol = "*";
      for (const char* candidate : kOps) {
        if (op.value == candidate) symbol = candidate;
      }
      left = binary(symbol, std::move(left), parse_pow(), op.line);
    }
    return left;
  }

  ExprPtr parse_pow() {
    ExprPtr left = parse_unary();
    while (at_operator("**")) {
      const int line = next().line;
      left = binary("**", std::move(left), parse_unary(), line);
    }
    return left;
  }

  ExprPtr parse_unary(bool with_filter = true) {
    DepthGuard guard(*this);
    ExprPtr node;
    if (at_operator("-") || at_operator("+")) {
      const Token& op = next();
      node = make(ExprType::Unary, op.line);
      node->name = op.value;
      node->args.push_back(parse_unary(false));
      node = grow(std::move(node));
    } else {
      node = parse_primary();
    }
    node = parse_postfix(std::move(node));
    if (with_filter) node = parse_filter_expr(std::move(node));
    return node;
  }

  ExprPtr parse_primary() {
    const Token& token = peek();
    if (token.type == TokenType::Name) {
      next();
      auto expr = make(ExprType::Literal, token.line);
      if (token.value == "true" || token.value == "True") {
        expr->literal = Value::boolean(true);
      } else if (token.value == "false" || token.value == "False") {
        expr->literal = Value::boolean(false);
      } else if (token.value == "none" || token.value == "None") {
        expr->literal = Value::none();
      } else {
        expr->type = ExprType::Name;
        expr->name = token.value;
      }
      return expr;
    }
    if (token.type == TokenType::String) {
      std::string text = next().value;
      while (peek().type == TokenType::String) text += next().value;
      auto expr = make(ExprType::Literal, token.line);
      expr->literal = Value::string(std::move(text));
      return expr;
    }
    if (token.type == TokenType::Integer) {
      next();
      errno = 0;
      char* end = nullptr;
      const long long value = std::strtoll(token.value.c_str(), &end, 10);
      if (errno == ERANGE) fail("integer literal " + token.value + " is too large", token.line);
      auto expr = make(ExprType::Literal, token.line);
      expr->literal = Value::integer(value);
      return expr;
    }
    if (token.type == TokenType::Float) {
      next();
      auto expr = make(ExprType::Literal, token.line);
      expr->literal = Value::floating(std::strtod(token.value.c_str(), nullptr));
      return expr;
    }
    if (at_operator("(")) {
      next();
      auto tuple = make(ExprType::List, token.line);
      if (at_operator(")")) {
        next();
        return tuple;
      }
      ExprPtr first = parse_expression();
      if (!at_operator(",")) {
        expect_operator(")");
        return first;
      }
      tuple->args.push_back(std::move(first));
      while (at_operator(",")) {
        next();
        if (at_operator(")")) break;
        tuple->args.push_back(parse_expression());
      }
      expect_operator(")");
      return grow(std::move(tuple));
    }
    if (at_operator("[")) {
      next();
      auto list = make(ExprType::List, token.line);
      while (!at_operator("]")) {
        list->args.push_back(parse_expression());
        if (!at_operator(",")) break;
        next();
      }
      expect_operator("]");
      return grow(std::move(list));
    }
    if (at_operator("{")) {
      next();
      auto dict = make(ExprType::Dict, token.line);
      while (!at_operator("}")) {
        dict->args.push_back(parse_expression());
        expect_operator(":");
        dict->args.push_back(parse_expression());
        if (!at_operator(",")) break;
        next();
      }
      expect_operator("}");
      return grow(std::move(dict));
    }
    fail("unexpected " + describe(token), token.line);
  }

  ExprPtr parse_postfix(ExprPtr node) {
    while (true) {
      if (at_operator(".")) {
        const int line = next().line;
        if (peek().type == TokenType::Integer) {
          auto index = make(ExprType::Literal, line);
          index->literal = Value::integer(std::strtoll(next().value.c_str(), nullptr, 10));
          auto subscript = make(ExprType::Subscript, line);
          subscript->args.push_back(std::move(node));
          subscript->args.push_back(std::move(index));
          node = grow(std::move(subscript));
          continue;
        }
        auto attribute = make(ExprType::Attribute, line);
        attribute->name = expect_name("an attribute name");
        attribute->args.push_back(std::move(node));
        node = grow(std::move(attribute));
      } else if (at_operator("[")) {
        node = parse_subscript(std::move(node));
      } else if (at_operator("(")) {
        node = parse_call(std::move(node));
      } else {
        return node;
      }
    }
  }

  ExprPtr parse_subscript(ExprPtr object) {
    const int line = next().line;
    DepthGuard guard(*this);
    ExprPtr start;
    if (!at_operator(":")) start = parse_expression();
    if (!at_operator(":")) {
      expect_operator("]");
      auto subscript = make(ExprType::Subscript, line);
      subscript->args.push_back(std::move(object));
      subscript->args.push_back(std::move(start));
      return grow(std::move(subscript));
    }
    next();
    ExprPtr stop;
    ExprPtr step;
    if (!at_operator(":") && !at_operator("]")) stop = parse_expression();
    if (at_operator(":")) {
      next();
      if (!at_operator("]")) step = parse_expression();
    }
    expect_operator("]");
    auto slice = make(ExprType::Slice, line);
    slice->args.push_back(std::move(object));
    slice->args.push_back(std::move(start));
    slice->args.push_back(std::move(stop));
    slice->args.push_back(std::move(step));
    return grow(std::move(slice));
  }

  // Arguments in parentheses, appended to `call` (whose args[0] is the callee or operand).
  void parse_call_args(Expr& call) {
    expect_operator("(");
    DepthGuard guard(*this);
    while (!at_operator(")")) {
      if (at_operator("*") || at_operator("**")) fail("unsupported '*' or '**' arguments", peek().line);
      if (peek().type == TokenType::Name && at_operator("=", 1)) {
        call.arg_names.push_back(next().value);
        next();
      } else {
        call.arg_names.emplace_back();
      }
      call.args.push_back(parse_expression());
      if (!at_operator(",")) break;
      next();
    }
    expect_operator(")");
  }

  ExprPtr parse_call(ExprPtr callee) {
    auto call = make(ExprType::Call, peek().line);
    call->args.push_back(std::move(callee));
    call->arg_names.emplace_back();
    parse_call_args(*call);
    return grow(std::move(call));
  }

  ExprPtr parse_filter_expr(ExprPtr node) {
    while (true) {
      if (at_operator("|")) {
        const int line = next().line;
        auto filter = make(ExprType::Filter, line);
        filter->name = expect_name("a filter name");
        if (!is_known_filter(filter->name)) fail("unsupported filter '" + filter->name + "'", line);
        filter->args.push_back(std::move(node));
        filter->arg_names.emplace_back();
        if (at_operator("(")) parse_call_args(*filter);
        node = grow(std::move(filter));
      } else if (at_name("is")) {
        const int line = next().line;
        auto test = make(ExprType::Test, line);
        if (at_name("not")) {
          next();
          test->negated = true;
        }
        test->name = expect_name("a test name");
        if (!is_known_test(test->name)) fail("unsupported test '" + test->name + "'", line);
        test->args.push_back(std::move(node));
        test->arg_names.emplace_back();
        const Token& after = peek();
        const bool starts_argument = after.type == TokenType::Name || after.type == TokenType::String ||
                                     after.type == TokenType::Integer || after.type == TokenType::Float ||
                                     at_operator("[") || at_operator("{");
        if (at_operator("(")) {
          parse_call_args(*test);
        } else if (starts_argument && !at_name("else") && !at_name("or") && !at_name("and")) {
          if (at_name("is")) fail("tests cannot be chained with 'is'", after.line);
          test->args.push_back(parse_postfix(parse_primary()));
          test->arg_names.emplace_back();
        }
        node = grow(std::move(test));
      } else if (at_operator("(")) {
        node = parse_call(std::move(node));
      } else {
        return node;
      }
    }
  }

  std::vector<Token> tokens_;
  size_t pos_ = 0;
  int depth_ = 0;
  int loop_depth_ = 0;
};

}  // namespace

std::vector<std::unique_ptr<Node>> parse_template(std::string_view source) {
  return Parser(tokenize(source)).parse();
}

}  // namespace mb::chat

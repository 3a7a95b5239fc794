// SPDX-License-Identifier: MIT
// Bad and hostile templates: every problem is an mb::Error that names the construct and the line,
// undefined values behave as Jinja's default Undefined, and the limits stop runaway templates.
#include <gtest/gtest.h>

#include "chat_test_support.h"

namespace mb {
namespace {

using chat_test::error_of;
using chat_test::render;

void expect_error(const std::string& source, const std::vector<std::string>& parts,
                  ChatRenderOptions options = {}) {
  const std::string message = error_of(source, {{"user", "hi"}}, options);
  ASSERT_FALSE(message.empty()) << "no error for: " << source;
  for (const std::string& part : parts) EXPECT_NE(message.find(part), std::string::npos) << message;
}

TEST(ChatErrors, UnsupportedConstructsAreNamedWithTheirLine) {
  expect_error("line one\n\n{{ messages | frobnicate }}",
               {"chat template: unsupported filter 'frobnicate' at line 3"});
  expect_error("{% if x is shiny %}{% endif %}", {"unsupported test 'shiny'", "line 1"});
  expect_error("a\n{% include 'other.jinja' %}", {"unsupported tag 'include'", "line 2"});
  expect_error("{% for x in y recursive %}{% endfor %}", {"recursive"});
  expect_error("{% filter upper %}x{% endfilter %}", {"unsupported tag 'filter'"});
  expect_error("{{ [].append(1) }}", {"unsupported method 'append' on list"});
  expect_error("{{ 'a'.zfill(3) }}", {"unsupported method 'zfill' on str"});
}

TEST(ChatErrors, MalformedSyntax) {
  expect_error("{{ 1 + }}", {"unexpected '}}'", "line 1"});
  expect_error("{% if true %}never closed", {"missing '{% endif %}'", "line 1"});
  expect_error("\n{% for m in messages %}", {"missing '{% endfor %}'", "line 2"});
  expect_error("{% endfor %}", {"unexpected 'endfor'"});
  expect_error("{{ 'unterminated }}", {"unterminated string"});
  expect_error("x\n\n{{ 1", {"unclosed '{{'", "line 3"});
  expect_error("{# never closed", {"unclosed comment"});
  expect_error("{% frobnicate %}", {"unknown tag 'frobnicate'"});
  expect_error("{{ a b }}", {"expected '}}'"});
  expect_error("{{ 1 @ 2 }}", {"unexpected character '@'"});
  expect_error("{% break %}", {"'break' outside a loop"});
  expect_error("{{ 99999999999999999999 }}", {"too large"});
}

TEST(ChatErrors, RaiseExceptionCarriesTheTemplatesMessage) {
  expect_error(
      "{% if messages[0].role != 'system' %}{{ raise_exception('Conversation must start with a system "
      "message') }}{% endif %}",
      {"raise_exception: Conversation must start with a system message"});
}

TEST(ChatErrors, UndefinedBehavesAsJinjasDefaultUndefined) {
  // Printing, testing and iterating an undefined value are fine...
  EXPECT_EQ(
      render("[{{ nothing }}]{% if nothing %}yes{% else %}no{% endif %}{% for x in nothing %}x{% endfor %}"
             "{{ nothing | length }}{{ 'a' in nothing }}{{ nothing ~ 'b' }}"),
      "[]no0Falseb");
  EXPECT_EQ(render("{{ messages[0].tool_calls is defined }}", {{"user", "hi"}}), "False");
  // ...using it as a value is not.
  expect_error("{{ nothing.attribute }}", {"'nothing' is undefined"});
  expect_error("{{ nothing + 1 }}", {"'nothing' is undefined"});
  expect_error("{{ nothing() }}", {"'nothing' is undefined"});
  expect_error("{{ nothing | tojson }}", {"not JSON serializable"});
}

TEST(ChatErrors, TypeErrorsAreReported) {
  expect_error("{{ 'a' + 1 }}", {"unsupported operand types for +: 'str' and 'int'"});
  expect_error("{{ 1 / 0 }}", {"division by zero"});
  expect_error("{{ 1 < 'a' }}", {"'<' not supported"});
  expect_error("{% for x in 5 %}{% endfor %}", {"'int' object is not iterable"});
  expect_error("{{ 9223372036854775807 + 1 }}", {"integer overflow"});
  expect_error("{% set x = 1 %}{% set x.y = 2 %}", {"not a namespace"});
}

TEST(ChatErrors, LoopIterationLimit) {
  ChatRenderOptions options;
  options.max_loop_iterations = 1000;
  expect_error("{% for i in range(100) %}{% for j in range(100) %}{% endfor %}{% endfor %}",
               {"more than 1000 times"}, options);
  EXPECT_EQ(error_of("{% for i in range(30) %}{% for j in range(30) %}{% endfor %}{% endfor %}", {}, options),
            "");
  expect_error("{% for i in range(100000000000) %}{% endfor %}", {"loop iteration limit"}, options);
}

TEST(ChatErrors, OutputAndStringLimits) {
  ChatRenderOptions options;
  options.max_output_bytes = 10000;
  expect_error("{% for i in range(100) %}{{ 'x' * 200 }}{% endfor %}", {"output exceeds 10000 bytes"},
               options);
  expect_error("{{ 'x' * 100000 }}", {"output limit"}, options);
  // A doubling string or list is stopped long before memory runs out.
  expect_error(
      "{% set ns = namespace(s='ab') %}{% for i in range(64) %}{% set ns.s = ns.s + ns.s %}{% endfor %}",
      {"output limit"}, options);
  expect_error(
      "{% set ns = namespace(l=[1]) %}{% for i in range(64) %}{% set ns.l = ns.l + ns.l %}{% endfor %}",
      {"output limit"}, options);
  // A list holding one long string many times cannot print past the limit either.
  expect_error("{% set s = 'x' * 5000 %}{{ [s, s, s, s] }}", {"10000 bytes"}, options);
  expect_error("{% set s = 'x' * 5000 %}{{ [s, s, s, s] | tojson }}", {"output limit"}, options);
}

TEST(ChatErrors, RecursionAndNestingLimits) {
  expect_error("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}", {"macro calls nest deeper than 64"});
  ChatRenderOptions options;
  options.max_recursion_depth = 5;
  expect_error("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}", {"deeper than 5"}, options);
  // Exponential macro recursion is bounded by the iteration limit.
  options.max_recursion_depth = 40;
  options.max_loop_iterations = 10000;
  expect_error(
      "{% macro f(n) %}{% if n > 0 %}{{ f(n - 1) }}{{ f(n - 1) }}{% endif %}{% endmacro %}{{ f(30) }}",
      {"more than 10000 times"}, options);
  expect_error("{{ " + std::string(500, '(') + "1" + std::string(500, ')') + " }}", {"nest deeper than"});
  std::string chain = "{{ 1";
  for (int i = 0; i < 2000; ++i) chain += " + 1";
  expect_error(chain + " }}", {"operations deep"});
  std::string filters = "{{ 'a'";
  for (int i = 0; i < 2000; ++i) filters += " | trim";
  expect_error(filters + " }}", {"operations deep"});
  std::string blocks;
  for (int i = 0; i < 300; ++i) blocks += "{% if true %}";
  expect_error(blocks, {"nest deeper than"});
  expect_error("{% set ns = namespace(x=[]) %}{% for i in range(100) %}{% set ns.x = [ns.x] %}{% endfor %}",
               {"nest deeper than 64"});
  expect_error("{% set ns = namespace() %}{% set ns.self = ns %}",
               {"namespace cannot hold another namespace"});
}

}  // namespace
}  // namespace mb

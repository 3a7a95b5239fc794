// SPDX-License-Identifier: MIT
// The Jinja subset itself: whitespace control as transformers configures it, scoping, loops,
// namespaces, macros, expressions, filters, tests and methods, with Python's semantics where
// @huggingface/jinja differs (noted at each case).
#include <gtest/gtest.h>

#include <thread>

#include "chat_test_support.h"

namespace mb {
namespace {

using chat_test::render;

const std::vector<ChatMessage> kChat = {{"system", "Be brief."}, {"user", "Hi"}, {"assistant", "Hello"}};

TEST(ChatEngine, TrimBlocksDropsTheNewlineAfterABlockTag) {
  EXPECT_EQ(render("{% if true %}\nyes\n{% endif %}\nend"), "yes\nend");
  // Not after an expression tag.
  EXPECT_EQ(render("{{ 'a' }}\nb"), "a\nb");
  // Comments are trimmed like blocks.
  EXPECT_EQ(render("{# note #}\nx"), "x");
}

TEST(ChatEngine, LstripBlocksDropsIndentationBeforeABlockTagAlone) {
  EXPECT_EQ(render("a\n    {% if true %}\n    b\n    {% endif %}\nc"), "a\n    b\nc");
  // Text before the tag on the same line is kept.
  EXPECT_EQ(render("a  {% if true %}b{% endif %}"), "a  b");
  // `{%+` keeps the indentation.
  EXPECT_EQ(render("  {%+ if true %}x{% endif %}"), "  x");
}

TEST(ChatEngine, MinusStripsAllWhitespaceOnItsSide) {
  EXPECT_EQ(render("a  \n  {{- 'b' -}}  \n  c"), "abc");
  EXPECT_EQ(render("a\n\n{%- if true -%}\n\n b \n\n{%- endif -%}\n\nc"), "abc");
  EXPECT_EQ(render("x {#- comment -#} y"), "xy");
}

TEST(ChatEngine, DropsOneTrailingNewlineAndReadsCarriageReturnsAsNewlines) {
  EXPECT_EQ(render("hello\n"), "hello");
  EXPECT_EQ(render("hello\n\n"), "hello\n");
  EXPECT_EQ(render("a\r\nb\rc"), "a\nb\nc");
}

TEST(ChatEngine, RawBlocksAreText) {
  EXPECT_EQ(render("{% raw %}{{ not evaluated }}{% endraw %}"), "{{ not evaluated }}");
}

TEST(ChatEngine, LoopVariablesAndElse) {
  EXPECT_EQ(render("{% for m in messages %}{{ loop.index }}{{ loop.index0 }}{{ loop.revindex }}"
                   "{{ 'F' if loop.first }}{{ 'L' if loop.last }}{{ loop.length }}|{% endfor %}",
                   kChat),
            "103F3|2123|321L3|");
  EXPECT_EQ(render("{% for x in [] %}x{% else %}empty{% endfor %}"), "empty");
  EXPECT_EQ(
      render("{% for m in messages if m.role != 'system' %}{{ loop.index }}{{ m.role }} {% endfor %}", kChat),
      "1user 2assistant ");
  EXPECT_EQ(render("{% for m in messages %}{{ loop.previtem.role if not loop.first }},{% endfor %}", kChat),
            ",system,user,");
  EXPECT_EQ(render("{% for k, v in {'a': 1, 'b': 2}.items() %}{{ k }}={{ v }};{% endfor %}"), "a=1;b=2;");
  EXPECT_EQ(render("{% for c in 'héé' %}[{{ c }}]{% endfor %}"), "[h][é][é]");
}

TEST(ChatEngine, BreakAndContinue) {
  EXPECT_EQ(render("{% for i in range(10) %}{% if i == 3 %}{% break %}{% endif %}{{ i }}{% endfor %}"),
            "012");
  EXPECT_EQ(render("{% for i in range(5) %}{% if i is odd %}{% continue %}{% endif %}{{ i }}{% endfor %}"),
            "024");
}

TEST(ChatEngine, SetInsideALoopDoesNotLeakButNamespacesDo) {
  EXPECT_EQ(render("{% set x = 'outer' %}{% for i in [1] %}{% set x = 'inner' %}{% endfor %}{{ x }}"),
            "outer");
  EXPECT_EQ(
      render("{% set ns = namespace(x='outer') %}{% for i in [1, 2] %}{% set ns.x = ns.x ~ i %}{% endfor %}"
             "{{ ns.x }}"),
      "outer12");
  // `if` opens no scope.
  EXPECT_EQ(render("{% if true %}{% set y = 1 %}{% endif %}{{ y }}"), "1");
  EXPECT_EQ(render("{% set a, b = [1, 2] %}{{ b }}{{ a }}"), "21");
  EXPECT_EQ(render("{% set block %}x{{ 1 + 1 }}{% endset %}[{{ block }}]"), "[x2]");
}

TEST(ChatEngine, Macros) {
  EXPECT_EQ(render("{% macro greet(name, punct='!') %}Hi {{ name }}{{ punct }}{% endmacro %}"
                   "{{ greet('Ann') }} {{ greet('Bo', punct='?') }} {{ greet(punct='.', name='Cy') }}"),
            "Hi Ann! Hi Bo? Hi Cy.");
  // A macro sees template variables, not the caller's loop variables.
  ChatRenderOptions options;
  options.bos_token = "<s>";
  EXPECT_EQ(
      render(
          "{% macro show() %}{{ bos_token }}{{ m }}{% endmacro %}{% for m in [1] %}{{ show() }}{% endfor %}",
          {}, options),
      "<s>");
}

TEST(ChatEngine, OperatorsFollowPython) {
  EXPECT_EQ(render("{{ 1 + 2 * 3 }} {{ (1 + 2) * 3 }} {{ 2 ** 3 ** 2 }} {{ 7 / 2 }} {{ 6 / 2 }}"),
            "7 9 64 3.5 3.0");
  // Python's floor division and modulo take the divisor's sign (@huggingface/jinja gives -1 for the
  // last one, JavaScript's remainder).
  EXPECT_EQ(render("{{ -7 // 2 }} {{ 7 // -2 }} {{ -7 % 3 }} {{ 7 % -3 }}"), "-4 -4 2 -2");
  EXPECT_EQ(render("{{ 'ab' * 3 }} {{ [1] * 2 }} {{ 'a' ~ 1 ~ none ~ true }}"), "ababab [1, 1] a1NoneTrue");
  EXPECT_EQ(render("{{ 1 < 2 < 3 }} {{ 3 > 2 > 2 }} {{ 'b' > 'a' }} {{ [1, 2] < [1, 3] }}"),
            "True False True True");
  EXPECT_EQ(render("{{ 'ell' in 'hello' }} {{ 2 not in [1, 2] }} {{ 'k' in {'k': 1} }} {{ not 0 }}"),
            "True False True True");
  EXPECT_EQ(render("{{ 0 or 'x' }} {{ 'a' and 'b' }} {{ none or [] }}"), "x b []");
  EXPECT_EQ(render("{{ 1 == 1.0 }} {{ true == 1 }} {{ 'a' == 'a' }} {{ [1, {'a': 2}] == [1, {'a': 2}] }}"),
            "True True True True");
}

TEST(ChatEngine, PrintsValuesAsPython) {
  // @huggingface/jinja prints true, "" and JSON here; Python prints True, None and reprs.
  EXPECT_EQ(render("{{ true }} {{ none }} {{ 1.5 }} {{ 2.0 }} {{ 1e20 }} {{ 1e-5 }} {{ 0.1 + 0.2 }}"),
            "True None 1.5 2.0 1e+20 1e-05 0.30000000000000004");
  EXPECT_EQ(render("{{ ['a', \"it's\", 1, none] }} {{ {'k': 'v', 'n': [true]} }}"),
            "['a', \"it's\", 1, None] {'k': 'v', 'n': [True]}");
  EXPECT_EQ(render("[{{ undefined_name }}]"), "[]");
}

TEST(ChatEngine, SubscriptsSlicesAndAttributes) {
  EXPECT_EQ(render("{{ messages[0]['role'] }} {{ messages[-1].content }} {{ messages[1:] | length }}", kChat),
            "system Hello 2");
  EXPECT_EQ(render("{{ 'abcdef'[1:4] }} {{ 'abcdef'[::-1] }} {{ 'abcdef'[-2:] }} {{ [1, 2, 3, 4][::2] }}"),
            "bcd fedcba ef [1, 3]");
  EXPECT_EQ(render("{{ 'héllo'[1] }} {{ 'héllo' | length }}"), "é 5");
  // Missing keys and out-of-range indexes are undefined, not errors.
  EXPECT_EQ(render("[{{ messages[0].missing }}][{{ messages[9] }}]", kChat), "[][]");
}

TEST(ChatEngine, Filters) {
  EXPECT_EQ(render("{{ '  a b  ' | trim }}|{{ 'x' | upper }}{{ 'Y' | lower }}|{{ 'hello world' | title }}"
                   "|{{ 'hELLO' | capitalize }}"),
            "a b|Xy|Hello World|Hello");
  EXPECT_EQ(render("{{ [1, 2, 3] | join(', ') }}|{{ ['a', 'b'] | first }}{{ ['a', 'b'] | last }}|{{ 'aXbX' | "
                   "replace('X', '-') }}"),
            "1, 2, 3|ab|a-b-");
  EXPECT_EQ(
      render("{{ '42' | int + 1 }} {{ 'x' | int }} {{ '3.9' | int }} {{ 3.9 | int }} {{ '2.5' | float }}"),
      "43 0 3 3 2.5");
  EXPECT_EQ(
      render("{{ undefined_name | default('d') }} {{ '' | default('d') }}|{{ '' | default('d', true) }}"),
      "d |d");
  EXPECT_EQ(render("{{ {'a': 1} | items | list }} {{ 'ab' | list }} {{ 12 | string ~ '!' }}"),
            "[['a', 1]] ['a', 'b'] 12!");
  EXPECT_EQ(
      render("{{ messages | selectattr('role', 'equalto', 'user') | map(attribute='content') | join }}"
             "{{ messages | rejectattr('role', 'in', ['system', 'user']) | map(attribute='role') | join }}",
             kChat),
      "Hiassistant");
  EXPECT_EQ(render("{{ ['b', 'A', 'c'] | sort | join }} {{ [3, 1, 2] | sort(reverse=true) | join }}"),
            "Abc 321");
  EXPECT_EQ(render("{{ 'a\\nb' | indent(2) }}|{{ 'a\\nb' | indent(2, true) }}"), "a\n  b|  a\n  b");
}

TEST(ChatEngine, ToJsonIsTransformersJsonDumps) {
  EXPECT_EQ(render("{{ {'a': [1, 2.5, none, true], 'b': 'é\"\\n'} | tojson }}"),
            "{\"a\": [1, 2.5, null, true], \"b\": \"é\\\"\\n\"}");
  EXPECT_EQ(render("{{ {'a': [1], 'b': {}} | tojson(indent=2) }}"),
            "{\n  \"a\": [\n    1\n  ],\n  \"b\": {}\n}");
  EXPECT_EQ(render("{{ {'b': 1, 'a': 2} | tojson(sort_keys=true) }}"), "{\"a\": 2, \"b\": 1}");
  EXPECT_EQ(render("{{ 'é' | tojson(ensure_ascii=true) }} {{ '\\x01' | tojson }}"),
            "\"\\u00e9\" \"\\u0001\"");
}

TEST(ChatEngine, Tests) {
  EXPECT_EQ(
      render(
          "{{ x is defined }} {{ x is undefined }} {{ none is none }} {{ 'a' is string }} {{ {} is mapping }}"
          " {{ [] is sequence }} {{ 1 is number }} {{ 1 is integer }} {{ 1.0 is float }} {{ true is boolean "
          "}}"),
      "False True True True True True True True True True");
  EXPECT_EQ(render("{{ 3 is odd }} {{ 4 is even }} {{ 9 is divisibleby 3 }} {{ 'a' is equalto 'a' }} {{ 1 is "
                   "not none }}"),
            "True True True True True");
}

TEST(ChatEngine, Methods) {
  EXPECT_EQ(
      render("[{{ ' x '.strip() }}][{{ 'xxhixx'.strip('x') }}][{{ ' x '.lstrip() }}][{{ ' x '.rstrip() }}]"),
      "[x][hi][x ][ x]");
  EXPECT_EQ(render("{{ 'abc'.startswith('ab') }} {{ 'abc'.endswith(('x', 'c')) }} {{ 'a,b,,c'.split(',') }}"
                   " {{ ' a  b '.split() }} {{ 'a b c'.split(' ', 1) }}"),
            "True True ['a', 'b', '', 'c'] ['a', 'b'] ['a', 'b c']");
  EXPECT_EQ(
      render("{{ \"they're\".title() }} {{ 'ABC'.lower() }} {{ 'abc'.upper() }} {{ '-'.join(['a', 'b']) }}"
             " {{ 'aaa'.replace('a', 'b', 2) }}"),
      "They'Re abc ABC a-b bba");
}

TEST(ChatEngine, DictMethodsOnMessages) {
  EXPECT_EQ(render("{% for m in messages %}{{ m.get('role') }}:{{ m.get('x', 'd') }}:{{ m.get('x') }}"
                   ":{{ m.keys() | join('+') }};{% endfor %}",
                   {{"user", "hi"}}),
            "user:d:None:role+content;");
}

TEST(ChatEngine, StrftimeNowUsesThePinnedTime) {
  ChatRenderOptions options;
  options.now_unix_seconds = 0;
  EXPECT_EQ(render("{{ strftime_now('%Y-%m-%d %H:%M %B %b') }}", {}, options),
            "1970-01-01 00:00 January Jan");
}

TEST(ChatEngine, PlainFormatIsDocumented) {
  const ChatTemplate plain = ChatTemplate::plain();
  const std::vector<ChatMessage> messages = {{"system", "Be brief."}, {"user", "Hi!"}};
  EXPECT_EQ(plain.render(messages, {}), "system: Be brief.\nuser: Hi!\nassistant:");
  ChatRenderOptions no_prompt;
  no_prompt.add_generation_prompt = false;
  EXPECT_EQ(plain.render(messages, no_prompt), "system: Be brief.\nuser: Hi!\n");
  EXPECT_EQ(plain.render({}, {}), "assistant:");
  // A reply that starts with a space, as generated after "assistant:", renders back as it was
  // generated: the next turn's prompt starts with the previous prompt and the reply's text.
  const std::string prompt = plain.render(messages, {});
  const std::vector<ChatMessage> answered = {
      {"system", "Be brief."}, {"user", "Hi!"}, {"assistant", " Hello there."}, {"user", "More."}};
  EXPECT_EQ(plain.render(answered, {}).rfind(prompt + " Hello there.\n", 0), 0u)
      << plain.render(answered, {});
  EXPECT_EQ(plain.render(std::vector<ChatMessage>{{"user", " x"}, {"assistant", ":::"}}, no_prompt),
            "user:  x\nassistant::::\n");
  // Content is data: Jinja syntax in it is not evaluated.
  EXPECT_EQ(plain.render(std::vector<ChatMessage>{{"user", "{{ 1 + 1 }}"}}, no_prompt),
            "user: {{ 1 + 1 }}\n");
}

TEST(ChatEngine, ATemplateIsSafeToRenderFromSeveralThreads) {
  const ChatTemplate t = ChatTemplate::parse("{% for m in messages %}{{ m.content | upper }}{% endfor %}");
  std::vector<std::thread> threads;
  std::vector<std::string> results(4);
  for (size_t i = 0; i < results.size(); ++i) {
    threads.emplace_back([&, i] {
      for (int k = 0; k < 200; ++k) results[i] = t.render(std::vector<ChatMessage>{{"user", "abc"}}, {});
    });
  }
  for (auto& thread : threads) thread.join();
  for (const auto& r : results) EXPECT_EQ(r, "ABC");
}

}  // namespace
}  // namespace mb

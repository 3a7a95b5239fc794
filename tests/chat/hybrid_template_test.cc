// SPDX-License-Identifier: MIT
// ChatTemplate::render_json, the entry point for what apply_chat_template passes besides plain
// messages (tools, tool calls, documents, keyword arguments), and the published hybrid templates
// (Granite-4.0, Nemotron-Nano-9B-v2, Nemotron-3-Nano) where transformers' Python Jinja and
// @huggingface/jinja, which wrote the goldens, disagree: these cases pin Python's result, checked
// against jinja2 3.1.6 set up as transformers sets it up (tools/chat_template_goldens/check_python.py).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "chat_test_support.h"
#include "common/timing.h"

namespace mb {
namespace {

const std::string kTemplateDir = std::string(MB_TEST_DATA_DIR) + "/chat_templates/";

std::string read_template(const std::string& name) {
  std::ifstream in(kTemplateDir + name, std::ios::binary);
  EXPECT_TRUE(in) << name;
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

std::string render_json(const std::string& source, const std::string& variables,
                        ChatRenderOptions options = {}) {
  return ChatTemplate::parse(source).render_json(variables, options);
}

std::string json_error_of(const std::string& source, const std::string& variables) {
  try {
    render_json(source, variables);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(ChatRenderJson, PassesMessagesToolsDocumentsAndKeywordArguments) {
  const std::string source =
      "{% for m in messages %}{{ m.role }}:{{ m.content }}|{{ m.tool_calls | length }};{% endfor %}"
      "{{ tools | length }} {{ documents[0].title }} {{ enable_thinking }} {{ add_generation_prompt }}";
  const std::string variables = R"({"messages": [{"role": "user", "content": "hi"},
      {"role": "assistant", "content": null, "tool_calls": [{"function": {"name": "f"}}]}],
      "tools": [{"name": "f"}, {"name": "g"}], "documents": [{"title": "Doc"}], "enable_thinking": false})";
  EXPECT_EQ(render_json(source, variables), "user:hi|0;assistant:None|1;2 Doc False True");
}

TEST(ChatRenderJson, MappingsKeepTheirKeyOrderAndPythonTypes) {
  // Python's json.loads keeps key order and tells 2.0 from 2; tojson shows both.
  EXPECT_EQ(
      render_json("{{ messages[0] | tojson }}", R"({"messages": [{"z": 1, "a": 2.0, "m": [true, null]}]})"),
      R"({"z": 1, "a": 2.0, "m": [true, null]})");
  EXPECT_EQ(render_json("{{ messages[0].x is integer }} {{ messages[0].y is float }}",
                        R"({"messages": [{"x": 3, "y": 3.5}]})"),
            "True True");
}

TEST(ChatRenderJson, ToolsAndDocumentsAreNoneUnlessGivenAsTransformersPassesThem) {
  const std::string source = "{{ tools is none }} {{ documents is defined }} {{ documents is none }}";
  EXPECT_EQ(render_json(source, R"({"messages": []})"), "True True True");
  EXPECT_EQ(chat_test::render(source), "True True True");
  EXPECT_EQ(render_json(source, R"({"messages": [], "tools": [], "documents": [1]})"), "False True False");
}

TEST(ChatRenderJson, KeywordArgumentsOverrideTheOptions) {
  ChatRenderOptions options;
  options.bos_token = "<s>";
  options.add_generation_prompt = false;
  EXPECT_EQ(render_json("{{ bos_token }}{{ add_generation_prompt }}", R"({"messages": []})", options),
            "<s>False");
  EXPECT_EQ(render_json("{{ bos_token }}{{ add_generation_prompt }}",
                        R"({"messages": [], "bos_token": "[B]", "add_generation_prompt": true})", options),
            "[B]True");
}

TEST(ChatRenderJson, RendersPlainMessagesAsRenderDoes) {
  const std::string source = read_template("granite-4.0.jinja");
  const std::vector<ChatMessage> messages = {
      {"system", "Be brief."}, {"user", "Hi é"}, {"assistant", "Hello"}};
  nlohmann::json variables = {{"messages", nlohmann::json::array()}};
  for (const ChatMessage& m : messages)
    variables["messages"].push_back({{"role", m.role}, {"content", m.content}});
  for (const bool prompt : {true, false}) {
    ChatRenderOptions options;
    options.add_generation_prompt = prompt;
    EXPECT_EQ(render_json(source, variables.dump(), options), chat_test::render(source, messages, options));
  }
}

TEST(ChatRenderJson, RefusesVariablesThatAreNotAnObjectWithAMessagesList) {
  const std::string source = "{{ messages }}";
  EXPECT_NE(json_error_of(source, "{").find("chat template variables is not valid JSON"), std::string::npos)
      << json_error_of(source, "{");
  EXPECT_NE(json_error_of(source, "[1]").find("expected a JSON object"), std::string::npos);
  EXPECT_NE(json_error_of(source, "{}").find("expected a \"messages\" list"), std::string::npos);
  EXPECT_NE(json_error_of(source, R"({"messages": "hi"})").find("expected a \"messages\" list"),
            std::string::npos);
  EXPECT_NE(json_error_of(source, R"({"messages": [18446744073709551615]})").find("is out of range"),
            std::string::npos);
  // Nesting deeper than template values may is refused while parsing, not by a stack overflow.
  const std::string deep = R"({"messages": [)" + std::string(100, '[') + std::string(100, ']') + "]}";
  EXPECT_NE(json_error_of(source, deep).find("nests arrays and objects deeper than 64 levels"),
            std::string::npos)
      << json_error_of(source, deep);
  EXPECT_NE(json_error_of(source, R"({"messages": [1e400]})").find("not valid JSON"), std::string::npos);
  // A repeated key keeps its first place and its last value, as Python's json.loads does.
  EXPECT_EQ(render_json("{{ messages[0] | tojson }}", R"({"messages": [{"a": 1, "b": 2, "a": 3}]})"),
            R"({"a": 3, "b": 2})");
  EXPECT_NE(json_error_of(source, "{\"messages\": [\"\xff\"]}").find("not valid JSON"), std::string::npos);
}

// Reading the variables is linear in their size: a mapping with many keys is not searched key by
// key as it grows (nlohmann's ordered_json would be quadratic here). The bound is loose enough for
// a loaded machine and sanitizers, and far below the quadratic time.
TEST(ChatRenderJson, ReadsManyKeysInLinearTime) {
  const auto variables = [](int n) {
    std::string text = R"({"messages": [], "many": {)";
    for (int i = 0; i < n; ++i) text += (i ? ",\"k" : "\"k") + std::to_string(i) + "\": 0";
    return text + "}}";
  };
  const ChatTemplate count = ChatTemplate::parse("{{ many | length }}");
  EXPECT_EQ(count.render_json(variables(1000), {}), "1000");
  // 100k keys take a fraction of a second; looked up one by one they take many seconds.
  const std::string large = variables(100000);
  const double seconds =
      test::least_cpu_seconds([&] { EXPECT_EQ(count.render_json(large, {}), "100000"); }, 1);
  EXPECT_LT(seconds, 5.0);
}

// A boolean or null tool-call argument and a boolean schema key go through `| string`, which is
// Python's str(): "True", "None", "False" (@huggingface/jinja prints "true", "" and "false").
TEST(HybridTemplates, Nemotron3PrintsScalarsAsPythonDoes) {
  const std::string variables = R"({
    "messages": [{"role": "user", "content": "Go"},
      {"role": "assistant", "content": "", "tool_calls": [{"type": "function", "function": {"name": "run",
        "arguments": {"verbose": true, "ratio": 0.5, "note": null, "ids": [1, 2], "opts": {"a": 1}}}}]}],
    "tools": [{"type": "function", "function": {"name": "run", "parameters": {"type": "object",
      "properties": {"verbose": {"type": "boolean", "nullable": true}}, "additionalProperties": false}}}]})";
  ChatRenderOptions options;
  options.add_generation_prompt = false;
  const std::string out = render_json(read_template("nemotron-3-nano.jinja"), variables, options);
  EXPECT_NE(out.find("<parameter=verbose>\nTrue\n</parameter>\n<parameter=ratio>\n0.5\n</parameter>\n"
                     "<parameter=note>\nNone\n</parameter>\n<parameter=ids>\n[1, 2]\n</parameter>\n"
                     "<parameter=opts>\n{\"a\": 1}\n</parameter>\n"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("<nullable>True</nullable>"), std::string::npos) << out;
  EXPECT_NE(out.find("<additionalProperties>False</additionalProperties>\n</parameters>"), std::string::npos)
      << out;
}

// Granite prints each tool with tojson: json.dumps keeps 2.0 a float (JavaScript prints 2).
TEST(HybridTemplates, Granite40PrintsToolsWithPythonsJson) {
  const std::string variables = R"({"messages": [{"role": "user", "content": "x"}],
    "tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object",
      "properties": {"x": {"type": "number", "default": 2.0}}}}, "strict": true}]})";
  const std::string out = render_json(read_template("granite-4.0.jinja"), variables);
  EXPECT_NE(
      out.find("<tools>\n{\"type\": \"function\", \"function\": {\"name\": \"f\", \"parameters\": {\"type\": "
               "\"object\", \"properties\": {\"x\": {\"type\": \"number\", \"default\": 2.0}}}}, \"strict\": "
               "true}\n</tools>"),
      std::string::npos)
      << out;
}

// Nemotron-Nano-9B-v2 tests `'</think>' in content`: a null content is Python's TypeError, a
// clear error here too (the API's content "" renders).
TEST(HybridTemplates, NemotronNanoV2RefusesANullContentAsPythonDoes) {
  const std::string source = read_template("nemotron-nano-9b-v2.jinja");
  const std::string message = json_error_of(
      source, R"({"messages": [{"role": "user", "content": "x"}, {"role": "assistant", "content": null},
                                {"role": "user", "content": "y"}]})");
  EXPECT_NE(message.find("argument of type 'NoneType' is not iterable"), std::string::npos) << message;
  EXPECT_EQ(json_error_of(source, R"({"messages": [{"role": "user", "content": "x"},
                                      {"role": "assistant", "content": ""}, {"role": "user", "content": "y"}]})"),
            "");
}

// The thinking switches, from the plain-messages entry point the server uses.
TEST(HybridTemplates, NemotronThinkingSwitches) {
  const ChatTemplate nano = ChatTemplate::parse(read_template("nemotron-nano-9b-v2.jinja"));
  ChatRenderOptions options;
  EXPECT_TRUE(
      nano.render(std::vector<ChatMessage>{{"user", "Hi"}}, options).ends_with("Assistant\n<think>\n"));
  const std::string off =
      nano.render(std::vector<ChatMessage>{{"system", "/no_think Be brief."}, {"user", "Hi"}}, options);
  EXPECT_EQ(off,
            "<SPECIAL_10>System\nBe brief.\n<SPECIAL_11>User\nHi\n<SPECIAL_11>Assistant\n<think></think>");
  const ChatTemplate reasoning = ChatTemplate::parse(read_template("nemotron-h-reasoning.jinja"));
  EXPECT_EQ(
      reasoning.render(std::vector<ChatMessage>{{"system", "{'reasoning': False}"}, {"user", "Hi"}}, options),
      "<SPECIAL_10>System\n{'reasoning': "
      "False}\n<SPECIAL_11>User\nHi\n<SPECIAL_11>Assistant\n<think></think>");
  const ChatTemplate nemotron3 = ChatTemplate::parse(read_template("nemotron-3-nano.jinja"));
  EXPECT_EQ(render_json(read_template("nemotron-3-nano.jinja"),
                        R"({"messages": [{"role": "user", "content": "Hi"}], "enable_thinking": false})"),
            "<|im_start|>system\n<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n<think></"
            "think>");
  EXPECT_TRUE(nemotron3.render(std::vector<ChatMessage>{{"user", "Hi"}}, options)
                  .ends_with("<|im_start|>assistant\n<think>\n"));
}

// A Hugging Face folder as these models ship it: the template in tokenizer_config.json (Granite,
// Nemotron-Nano-9B-v2) or in chat_template.jinja (Nemotron-3-Nano), found and rendered as the
// server does.
TEST(HybridTemplates, FoundInAModelFolderAsShipped) {
  const auto dir = std::filesystem::temp_directory_path() / ("mb_chat_hybrid_" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  const nlohmann::json config = {{"bos_token", "<|end_of_text|>"},
                                 {"eos_token", "<|end_of_text|>"},
                                 {"chat_template", read_template("granite-4.0.jinja")}};
  std::ofstream(dir / "tokenizer_config.json") << config.dump(2);
  const auto found = find_chat_template(dir.string());
  ASSERT_TRUE(found.has_value());
  EXPECT_EQ(found->source, read_template("granite-4.0.jinja"));
  EXPECT_EQ(found->options.eos_token, "<|end_of_text|>");
  const std::string out =
      ChatTemplate::parse(found->source).render(std::vector<ChatMessage>{{"user", "Hi"}}, found->options);
  EXPECT_EQ(out,
            "<|start_of_role|>system<|end_of_role|>You are a helpful assistant. Please ensure responses are "
            "professional, accurate, and "
            "safe.<|end_of_text|>\n<|start_of_role|>user<|end_of_role|>Hi<|end_of_text|>\n"
            "<|start_of_role|>assistant<|end_of_role|>");
  std::filesystem::remove(dir / "tokenizer_config.json");
  std::ofstream(dir / "tokenizer_config.json") << R"({"eos_token": "<|im_end|>"})";
  std::ofstream(dir / "chat_template.jinja", std::ios::binary) << read_template("nemotron-3-nano.jinja");
  const auto jinja = find_chat_template(dir.string());
  ASSERT_TRUE(jinja.has_value());
  EXPECT_EQ(jinja->source, read_template("nemotron-3-nano.jinja"));
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace mb

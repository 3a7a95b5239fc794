// SPDX-License-Identifier: MIT
// A model whose chat template is Qwen3.5's (tests/data/chat_templates/qwen3.5.jinja) through the
// server's request and reply paths: the template asks for the Qwen3-Coder XML call form and opens
// a thinking block in its generation prompt, so a reply starts as reasoning; its calls come back
// as tool_calls whole and streamed (every split of the text), and a forced call is constrained to
// that form; a call the server returned renders back as the model wrote it; chat_template_kwargs
// reach the template from chat completions, the Responses API and the Anthropic Messages API, and
// a keyword the template does not read changes nothing.
#include <gtest/gtest.h>

#include <fstream>
#include <string>
#include <vector>

#include "common/test_util.h"
#include "server/chat_output.h"
#include "server/messages_api.h"
#include "server/openai_api.h"
#include "server/responses_api.h"

namespace mb::server {
namespace {

using nlohmann::json;

const Tokenizer& qwen35_tokenizer() {
  static const Tokenizer t = [] {
    const std::string path = test::make_temp_dir("qwen35_chat") + "/tokenizer.json";
    write_byte_level_tokenizer_json(path, 400);
    return Tokenizer::from_json_file(path);
  }();
  return t;
}

const ServedChatTemplate& qwen35_served() {
  static const ServedChatTemplate served = [] {
    const std::string dir = test::make_temp_dir("qwen35_chat_template");
    const json config = {{"eos_token", "<|im_end|>"},
                         {"chat_template", test::read_data_file("chat_templates/qwen3.5.jinja")}};
    std::ofstream(dir + "/tokenizer_config.json") << config.dump();
    return load_served_chat_template(dir);
  }();
  return served;
}

constexpr const char* kQwen35Tools =
    R"("tools": [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object",
        "properties": {"city": {"type": "string"}, "days": {"type": "integer"}}}}},
        {"type": "function", "function": {"name": "get_time"}}])";

ApiRequest qwen35_chat(const std::string& body) {
  return prepare_api_request(ApiKind::Chat, body, qwen35_tokenizer(), qwen35_served(), {}, 1, "m");
}

ApiRequest qwen35_user_request(const std::string& fields) {
  return qwen35_chat(R"({"messages": [{"role": "user", "content": "Weather in Paris?"}])" +
                     (fields.empty() ? "" : ", " + fields) + "}");
}

std::string qwen35_prompt(const ApiRequest& request) {
  return qwen35_tokenizer().decode(request.serve.prompt);
}

bool qwen35_ends_with(const std::string& text, const std::string& end) {
  return text.size() >= end.size() && text.compare(text.size() - end.size(), end.size(), end) == 0;
}

std::vector<ServeEvent> qwen35_events(const std::string& text, size_t piece) {
  std::vector<ServeEvent> events;
  for (size_t at = 0; at < text.size(); at += piece) {
    ServeEvent e;
    e.kind = ServeEvent::Kind::Token;
    e.token = 65;
    e.text = text.substr(at, piece);
    events.push_back(std::move(e));
  }
  ServeEvent done;
  done.kind = ServeEvent::Kind::Done;
  done.stop_reason = StopReason::Eos;
  done.prompt_tokens = 5;
  done.completion_tokens = 9;
  events.push_back(done);
  return events;
}

// What the model writes after the generation prompt's "<think>\n", in the form the template asks
// for: reasoning, its close, text, then two calls.
const std::string kQwen35Call =
    "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n<parameter=days>\n3\n"
    "</parameter>\n</function>\n</tool_call>";
const std::string kQwen35Reply = "The user wants the weather.\n</think>\n\nLet me check.\n\n" + kQwen35Call +
                                 "\n<tool_call>\n<function=get_time>\n</function>\n</tool_call>";

TEST(Qwen35Chat, TheTemplateAsksForXmlCallsAndThinkMarkers) {
  const ChatFormat format = detect_chat_format(test::read_data_file("chat_templates/qwen3.5.jinja"));
  EXPECT_EQ(format.tools, ToolCallFormat::XmlFunction);
  EXPECT_EQ(format.think_open, "<think>");
  EXPECT_EQ(format.think_close, "</think>");
  EXPECT_EQ(qwen35_served().error, "");
  EXPECT_EQ(qwen35_served().format.tools, ToolCallFormat::XmlFunction);
}

TEST(Qwen35Chat, ParserSplitsReasoningTextAndCallsInEveryPieceSize) {
  ChatParseOptions options;
  options.tool_names = {"get_weather", "get_time"};
  options.starts_in_reasoning = true;
  for (size_t piece : {0, 1, 2, 3, 7}) {
    SCOPED_TRACE(piece);
    ChatOutputParser parser(qwen35_served().format, options);
    const size_t step = piece == 0 ? kQwen35Reply.size() : piece;
    std::string content, reasoning;
    for (size_t at = 0; at < kQwen35Reply.size(); at += step) {
      const ChatDelta delta = parser.feed(kQwen35Reply.substr(at, step));
      content += delta.content;
      reasoning += delta.reasoning;
    }
    const ChatDelta last = parser.finish();
    content += last.content;
    reasoning += last.reasoning;
    EXPECT_EQ(reasoning, "The user wants the weather.");
    EXPECT_EQ(content, "Let me check.");
    ASSERT_EQ(parser.tool_calls().size(), 2u);
    EXPECT_EQ(parser.tool_calls()[0].name, "get_weather");
    EXPECT_EQ(parser.tool_calls()[0].arguments, R"({"city":"Paris","days":3})");
    EXPECT_EQ(parser.tool_calls()[1].name, "get_time");
    EXPECT_EQ(parser.tool_calls()[1].arguments, "{}");
  }
}

TEST(Qwen35Chat, ChatCompletionsReturnReasoningAndToolCallsWholeAndStreamed) {
  const ApiRequest request = qwen35_user_request(kQwen35Tools);
  EXPECT_TRUE(request.reply.starts_in_thinking);
  EXPECT_TRUE(qwen35_ends_with(qwen35_prompt(request), "<|im_start|>assistant\n<think>\n"));
  ResponseFormatter whole(request, qwen35_tokenizer(), "chatcmpl-q", 1);
  for (const ServeEvent& e : qwen35_events(kQwen35Reply, 5)) whole.collect(e);
  const json response = whole.response();
  const json& message = response["choices"][0]["message"];
  EXPECT_EQ(response["choices"][0]["finish_reason"], "tool_calls");
  EXPECT_EQ(message["reasoning_content"], "The user wants the weather.");
  EXPECT_EQ(message["content"], "Let me check.");
  ASSERT_EQ(message["tool_calls"].size(), 2u);
  EXPECT_EQ(message["tool_calls"][0]["function"]["name"], "get_weather");
  EXPECT_EQ(message["tool_calls"][0]["function"]["arguments"], R"({"city":"Paris","days":3})");
  EXPECT_EQ(message["tool_calls"][1]["function"]["name"], "get_time");

  const ApiRequest streamed = qwen35_user_request(std::string(kQwen35Tools) + R"(, "stream": true)");
  ResponseFormatter formatter(streamed, qwen35_tokenizer(), "chatcmpl-q", 1);
  std::string content, reasoning;
  std::vector<std::string> names, arguments;
  std::string finish;
  for (const ServeEvent& e : qwen35_events(kQwen35Reply, 1)) {
    for (const json& chunk : formatter.stream_chunks(e)) {
      if (!chunk.contains("choices") || chunk["choices"].empty()) continue;
      const json& choice = chunk["choices"][0];
      if (choice.contains("finish_reason") && choice["finish_reason"].is_string())
        finish = choice["finish_reason"];
      const json& delta = choice["delta"];
      if (delta.contains("content") && delta["content"].is_string())
        content += delta["content"].get<std::string>();
      if (delta.contains("reasoning_content")) reasoning += delta["reasoning_content"].get<std::string>();
      if (!delta.contains("tool_calls")) continue;
      for (const json& call : delta["tool_calls"]) {
        const size_t index = call["index"];
        if (index == names.size()) {
          names.push_back(call["function"]["name"]);
          arguments.emplace_back();
        }
        ASSERT_LT(index, names.size());
        arguments[index] += call["function"]["arguments"].get<std::string>();
      }
    }
  }
  EXPECT_EQ(reasoning, "The user wants the weather.");
  EXPECT_EQ(content, "Let me check.");
  EXPECT_EQ(names, (std::vector<std::string>{"get_weather", "get_time"}));
  EXPECT_EQ(arguments, (std::vector<std::string>{R"({"city":"Paris","days":3})", "{}"}));
  EXPECT_EQ(finish, "tool_calls");
}

TEST(Qwen35Chat, AForcedCallIsConstrainedToTheXmlForm) {
  const ApiRequest required =
      qwen35_user_request(std::string(kQwen35Tools) + R"(, "tool_choice": "required")");
  ASSERT_TRUE(required.grammar.has_value());
  EXPECT_NE(required.grammar->find("<function=get_weather>"), std::string::npos) << *required.grammar;
  EXPECT_NE(required.grammar->find("<parameter=city>"), std::string::npos) << *required.grammar;
  EXPECT_NE(required.serve.constraint, nullptr);
  // The prompt opened the thinking block, so the reply may think before its call.
  EXPECT_TRUE(required.reply.starts_in_thinking);
}

TEST(Qwen35Chat, AReturnedCallRendersBackAsTheModelWroteIt) {
  // The follow-up turn carries the call as OpenAI returned it (arguments as JSON text); the
  // template iterates them as a mapping and prints the same block, so the cached prefix holds.
  const ApiRequest follow_up =
      qwen35_chat(std::string(R"({"messages": [{"role": "user", "content": "Weather in Paris?"},
        {"role": "assistant", "content": "", "tool_calls": [{"id": "call_1", "type": "function",
          "function": {"name": "get_weather", "arguments": "{\"city\":\"Paris\",\"days\":3}"}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": "21"}], )") +
                  kQwen35Tools + "}");
  const std::string prompt = qwen35_prompt(follow_up);
  EXPECT_NE(prompt.find("<|im_start|>assistant\n<think>\n\n</think>\n\n" + kQwen35Call +
                        "<|im_end|>\n"
                        "<|im_start|>user\n<tool_response>\n21\n</tool_response><|im_end|>\n"),
            std::string::npos)
      << prompt;
}

TEST(Qwen35Chat, ChatTemplateKwargsReachTheTemplateFromEveryApi) {
  const std::string off_end = "<|im_start|>assistant\n<think>\n\n</think>\n\n";
  const std::string on_end = "<|im_start|>assistant\n<think>\n";
  // Chat completions; a keyword the template does not read is no error and changes nothing.
  const ApiRequest off = qwen35_user_request(R"("chat_template_kwargs": {"enable_thinking": false})");
  EXPECT_TRUE(qwen35_ends_with(qwen35_prompt(off), off_end));
  EXPECT_FALSE(off.reply.starts_in_thinking);
  EXPECT_EQ(qwen35_prompt(qwen35_user_request(R"("chat_template_kwargs": {"enable_thinking": false,
                                                   "unread_flag": {"x": [1]}})")),
            qwen35_prompt(off));
  EXPECT_EQ(qwen35_prompt(qwen35_user_request(R"("chat_template_kwargs": {"custom": 1})")),
            qwen35_prompt(qwen35_user_request("")));
  // The Responses API.
  const auto responses = [](const std::string& fields) {
    return qwen35_prompt(qwen35_chat(
        translate_responses_request(R"({"input": "Weather in Paris?")" + fields + "}", nullptr, 64)
            .chat_body));
  };
  EXPECT_TRUE(
      qwen35_ends_with(responses(R"(, "chat_template_kwargs": {"enable_thinking": false})"), off_end));
  EXPECT_TRUE(qwen35_ends_with(responses(R"(, "chat_template_kwargs": {"other": true})"), on_end));
  // The Anthropic Messages API: its thinking switch, and chat_template_kwargs as llama.cpp's
  // server takes them there (thinking decides enable_thinking when both are given).
  const auto messages = [](const std::string& fields) {
    return qwen35_prompt(qwen35_chat(
        translate_messages_request(
            R"({"max_tokens": 8, "messages": [{"role": "user", "content": "Weather in Paris?"}])" + fields +
                "}",
            false, 64)
            .chat_body));
  };
  EXPECT_TRUE(qwen35_ends_with(messages(R"(, "thinking": {"type": "disabled"})"), off_end));
  EXPECT_TRUE(
      qwen35_ends_with(messages(R"(, "thinking": {"type": "enabled", "budget_tokens": 64})"), on_end));
  EXPECT_TRUE(
      qwen35_ends_with(messages(R"(, "chat_template_kwargs": {"enable_thinking": false, "x": 1})"), off_end));
  EXPECT_TRUE(qwen35_ends_with(
      messages(R"(, "chat_template_kwargs": {"enable_thinking": false}, "thinking": {"type": "enabled"})"),
      on_end));
  EXPECT_TRUE(qwen35_ends_with(messages(""), on_end));
  try {
    messages(R"(, "chat_template_kwargs": [1])");
    ADD_FAILURE() << "a list of keyword arguments was taken";
  } catch (const ApiError& e) {
    EXPECT_NE(std::string(e.what()).find("chat_template_kwargs"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace mb::server

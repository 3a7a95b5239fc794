// SPDX-License-Identifier: MIT
// Tool calls and reasoning in chat completions (src/server/chat_tools.h), through the same
// prepare_api_request and ResponseFormatter the server runs: message.tool_calls with content null
// and finish_reason "tool_calls"; the streamed name-then-arguments deltas; malformed calls as text
// with "stop"; reasoning_content split by the template's markers (or not, --reasoning-format
// none); and every tool-call format round-trips: a template's rendering of a call parses back to
// the call, and the parsed call renders back to the same text.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <string>
#include <vector>

#include "common/test_util.h"
#include "server/openai_api.h"

namespace mb::server {
namespace {

using nlohmann::json;
using nlohmann::ordered_json;

const Tokenizer& tools_tokenizer() {
  static const Tokenizer t = [] {
    const std::string path = test::make_temp_dir("chat_tools") + "/tokenizer.json";
    write_byte_level_tokenizer_json(path, 400);
    return Tokenizer::from_json_file(path);
  }();
  return t;
}

ServedChatTemplate tools_template(const std::string& file) {
  const std::string dir = test::make_temp_dir("chat_tools_template");
  const json config = {{"bos_token", "<s>"},
                       {"eos_token", "</s>"},
                       {"chat_template", test::read_data_file("chat_templates/" + file)}};
  std::ofstream(dir + "/tokenizer_config.json") << config.dump();
  ServedChatTemplate served = load_served_chat_template(dir);
  EXPECT_EQ(served.error, "") << file;
  return served;
}

const char* kWeatherTools =
    R"("tools": [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object",
        "properties": {"city": {"type": "string"}}}}}, {"type": "function", "function": {"name": "get_time"}}])";

ApiRequest tools_request(const ServedChatTemplate& served, const std::string& fields,
                         const ApiDefaults& defaults = {}) {
  const std::string body = R"({"messages": [{"role": "user", "content": "Weather in Paris?"}])" +
                           (fields.empty() ? "" : ", " + fields) + "}";
  return prepare_api_request(ApiKind::Chat, body, tools_tokenizer(), served, defaults, 1, "m");
}

ServeEvent tools_token(std::string text) {
  ServeEvent e;
  e.kind = ServeEvent::Kind::Token;
  e.token = 65;
  e.text = std::move(text);
  return e;
}

ServeEvent tools_done(StopReason reason = StopReason::Eos) {
  ServeEvent e;
  e.kind = ServeEvent::Kind::Done;
  e.stop_reason = reason;
  e.prompt_tokens = 5;
  e.completion_tokens = 9;
  return e;
}

// The reply `text` delivered in pieces of `piece` bytes, then Done.
std::vector<ServeEvent> tools_events(const std::string& text, size_t piece,
                                     StopReason reason = StopReason::Eos) {
  std::vector<ServeEvent> events;
  for (size_t at = 0; at < text.size(); at += piece) events.push_back(tools_token(text.substr(at, piece)));
  events.push_back(tools_done(reason));
  return events;
}

json tools_response(const ApiRequest& request, const std::vector<ServeEvent>& events) {
  ResponseFormatter formatter(request, tools_tokenizer(), "chatcmpl-t", 1);
  for (const ServeEvent& e : events) formatter.collect(e);
  return formatter.response();
}

std::vector<json> tools_stream(const ApiRequest& request, const std::vector<ServeEvent>& events) {
  ResponseFormatter formatter(request, tools_tokenizer(), "chatcmpl-t", 1);
  std::vector<json> chunks;
  for (const ServeEvent& e : events)
    for (json& chunk : formatter.stream_chunks(e)) chunks.push_back(std::move(chunk));
  return chunks;
}

const std::string kGraniteCall =
    "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>";

TEST(ChatTools, ToolCallsFillTheMessageWithContentNull) {
  const ServedChatTemplate granite = tools_template("granite-4.0.jinja");
  const ApiRequest request = tools_request(granite, kWeatherTools);
  const json response = tools_response(request, tools_events(kGraniteCall + "\n" + kGraniteCall, 3));
  const json& choice = response["choices"][0];
  EXPECT_EQ(choice["finish_reason"], "tool_calls");
  const json& message = choice["message"];
  EXPECT_EQ(message["role"], "assistant");
  EXPECT_TRUE(message["content"].is_null());
  EXPECT_FALSE(message.contains("reasoning_content"));
  ASSERT_EQ(message["tool_calls"].size(), 2u);
  for (const json& call : message["tool_calls"]) {
    EXPECT_EQ(call["type"], "function");
    EXPECT_EQ(call["function"]["name"], "get_weather");
    EXPECT_EQ(call["function"]["arguments"], R"({"city":"Paris"})");
    EXPECT_EQ(call["id"].get<std::string>().rfind("call_", 0), 0u);
  }
  EXPECT_NE(message["tool_calls"][0]["id"], message["tool_calls"][1]["id"]);
}

TEST(ChatTools, StreamedCallsSendTheNameThenTheArguments) {
  const ServedChatTemplate granite = tools_template("granite-4.0.jinja");
  const ApiRequest request = tools_request(granite, std::string(kWeatherTools) + R"(, "stream": true)");
  const std::vector<json> chunks = tools_stream(request, tools_events("Checking.\n" + kGraniteCall, 1));
  std::string content;
  std::vector<json> calls;
  for (const json& chunk : chunks) {
    const json& delta = chunk["choices"][0]["delta"];
    if (delta.contains("content")) content += delta["content"].get<std::string>();
    if (delta.contains("tool_calls")) calls.push_back(delta["tool_calls"][0]);
  }
  EXPECT_EQ(content, "Checking.");
  ASSERT_EQ(calls.size(), 2u);
  EXPECT_EQ(calls[0]["index"], 0);
  EXPECT_EQ(calls[0]["type"], "function");
  EXPECT_EQ(calls[0]["function"]["name"], "get_weather");
  EXPECT_EQ(calls[0]["function"]["arguments"], "");
  EXPECT_EQ(calls[0]["id"].get<std::string>().size(), 29u);
  EXPECT_EQ(calls[1]["index"], 0);
  EXPECT_FALSE(calls[1].contains("id"));
  EXPECT_EQ(calls[1]["function"]["arguments"], R"({"city":"Paris"})");
  EXPECT_EQ(chunks.back()["choices"][0]["finish_reason"], "tool_calls");
}

TEST(ChatTools, AMalformedCallIsTextAndStops) {
  const ServedChatTemplate granite = tools_template("granite-4.0.jinja");
  const std::string bad = "<tool_call>{\"name\": \"get_weather\", \"arguments\": {\"city\": }}</tool_call>";
  const json response = tools_response(tools_request(granite, kWeatherTools), tools_events(bad, 4));
  EXPECT_EQ(response["choices"][0]["finish_reason"], "stop");
  EXPECT_EQ(response["choices"][0]["message"]["content"], bad);
  EXPECT_FALSE(response["choices"][0]["message"].contains("tool_calls"));
  // Calls of a template without a tool format, or of a request without tools, are text too.
  for (const auto& [file, fields] :
       {std::pair<std::string, std::string>{"chatml.jinja", kWeatherTools},
        std::pair<std::string, std::string>{"granite-4.0.jinja", ""},
        std::pair<std::string, std::string>{"granite-4.0.jinja",
                                            std::string(kWeatherTools) + R"(, "tool_choice": "none")"}}) {
    const json text =
        tools_response(tools_request(tools_template(file), fields), tools_events(kGraniteCall, 5));
    EXPECT_EQ(text["choices"][0]["message"]["content"], kGraniteCall) << file << " " << fields;
    EXPECT_EQ(text["choices"][0]["finish_reason"], "stop");
  }
  // A call cut off by max_tokens is text, with "length".
  const json cut = tools_response(tools_request(granite, kWeatherTools),
                                  tools_events(kGraniteCall.substr(0, 30), 7, StopReason::MaxTokens));
  EXPECT_EQ(cut["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(cut["choices"][0]["message"]["content"], kGraniteCall.substr(0, 30));
}

TEST(ChatTools, ReasoningIsSplitByTheTemplatesMarkers) {
  const ServedChatTemplate qwen = tools_template("qwen3.jinja");
  const std::string reply = "<think>\nParis is in France.\n</think>\n\nIt is sunny.";
  const json response = tools_response(tools_request(qwen, ""), tools_events(reply, 2));
  EXPECT_EQ(response["choices"][0]["message"]["reasoning_content"], "Paris is in France.");
  EXPECT_EQ(response["choices"][0]["message"]["content"], "It is sunny.");
  EXPECT_EQ(response["choices"][0]["finish_reason"], "stop");

  std::string reasoning, content;
  for (const json& chunk : tools_stream(tools_request(qwen, R"("stream": true)"), tools_events(reply, 1))) {
    const json& delta = chunk["choices"][0]["delta"];
    if (delta.contains("reasoning_content")) reasoning += delta["reasoning_content"].get<std::string>();
    if (delta.contains("content")) content += delta["content"].get<std::string>();
  }
  EXPECT_EQ(reasoning, "Paris is in France.");
  EXPECT_EQ(content, "It is sunny.");

  // --reasoning-format none leaves it in the content, as generated.
  ApiDefaults none;
  none.reasoning.split = false;
  const json kept = tools_response(tools_request(qwen, "", none), tools_events(reply, 2));
  EXPECT_EQ(kept["choices"][0]["message"]["content"], reply);
  EXPECT_FALSE(kept["choices"][0]["message"].contains("reasoning_content"));
}

TEST(ChatTools, APromptThatOpensTheThinkingBlockStartsTheReplyAsReasoning) {
  // Nemotron-3-Nano's generation prompt ends with "<think>\n" unless enable_thinking is false.
  const ServedChatTemplate nemotron = tools_template("nemotron-3-nano.jinja");
  const ApiRequest thinking = tools_request(nemotron, "");
  EXPECT_TRUE(thinking.reply.starts_in_thinking);
  const json response = tools_response(thinking, tools_events("Short.\n</think>\nHi.", 3));
  EXPECT_EQ(response["choices"][0]["message"]["reasoning_content"], "Short.");
  EXPECT_EQ(response["choices"][0]["message"]["content"], "Hi.");
  const ApiRequest off = tools_request(nemotron, R"("chat_template_kwargs": {"enable_thinking": false})");
  EXPECT_FALSE(off.reply.starts_in_thinking);
  EXPECT_EQ(tools_response(off, tools_events("Hi.", 1))["choices"][0]["message"]["content"], "Hi.");
}

TEST(ChatTools, AForcedCallIsTheRequestsGrammarAndTheBudgetComesFirst) {
  const ServedChatTemplate granite = tools_template("granite-4.0.jinja");
  EXPECT_EQ(tools_request(granite, kWeatherTools).serve.constraint, nullptr);
  const ApiRequest required =
      tools_request(granite, std::string(kWeatherTools) + R"(, "tool_choice": "required")");
  ASSERT_TRUE(required.grammar.has_value());
  EXPECT_NE(required.grammar->find("<tool_call>"), std::string::npos);
  ASSERT_NE(required.serve.constraint, nullptr);
  // The constraint allows the call's first byte and not a letter.
  std::vector<float> logits(static_cast<size_t>(tools_tokenizer().vocab_size()), 0.0f);
  required.serve.constraint->clone()->mask(logits);
  EXPECT_TRUE(std::isfinite(logits[static_cast<size_t>(tools_tokenizer().encode("<")[0])]));
  EXPECT_FALSE(std::isfinite(logits[static_cast<size_t>(tools_tokenizer().encode("H")[0])]));
  // Another grammar as well is refused by name.
  const auto refused = [&](const std::string& fields) {
    try {
      tools_request(granite, fields);
    } catch (const ApiError& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_NE(
      refused(std::string(kWeatherTools) + R"(, "tool_choice": "required", "grammar": "root ::= \"x\"")")
          .find("and so does the request's grammar"),
      std::string::npos);
  // A budget puts the thinking block's constraint first: Nemotron-3's prompt opened the block, so
  // the first token is free even under a forced call, and after the budget the close is forced.
  const ServedChatTemplate nemotron = tools_template("nemotron-3-nano.jinja");
  const ApiRequest budget = tools_request(
      nemotron, std::string(kWeatherTools) + R"(, "tool_choice": "required", "thinking_budget_tokens": 1)");
  ASSERT_NE(budget.serve.constraint, nullptr);
  std::unique_ptr<TokenConstraint> thinking = budget.serve.constraint->clone();
  std::fill(logits.begin(), logits.end(), 0.0f);
  thinking->mask(logits);
  EXPECT_TRUE(std::all_of(logits.begin(), logits.end(), [](float v) { return std::isfinite(v); }));
  thinking->accept(tools_tokenizer().encode("H")[0]);
  thinking->mask(logits);
  const int32_t close_first = tools_tokenizer().encode("</think>")[0];
  for (size_t i = 0; i < logits.size(); ++i)
    EXPECT_EQ(std::isfinite(logits[i]), static_cast<int32_t>(i) == close_first);
  // Without a budget, grammar or opened block there is nothing to constrain.
  EXPECT_EQ(tools_request(nemotron, R"("chat_template_kwargs": {"enable_thinking": false})").serve.constraint,
            nullptr);
}

TEST(ChatTools, PlainRepliesKeepTheirExactText) {
  // A template with neither tools nor thinking markers: the reply is not parsed at all.
  const ServedChatTemplate chatml = tools_template("chatml.jinja");
  const ApiRequest request = tools_request(chatml, "");
  EXPECT_FALSE(request.reply.parse);
  const std::string reply = "  <think>not a marker here</think>\n ";
  EXPECT_EQ(tools_response(request, tools_events(reply, 1))["choices"][0]["message"]["content"], reply);
}

// A conversation with `message` between a user turn and a tool result (a final assistant turn is
// continued, not closed, by some templates), with tools offered.
std::string rendered_turn(const ServedChatTemplate& served, const ordered_json& message) {
  ordered_json tool = ordered_json::parse(
      R"({"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object",
          "properties": {"city": {"type": "string"}, "days": {"type": "integer"}}}}})");
  const ordered_json variables = {
      {"messages",
       ordered_json::array(
           {{{"role", "user"}, {"content", "Weather?"}}, message, {{"role", "tool"}, {"content", "21"}}})},
      {"tools", ordered_json::array({tool})}};
  ChatRenderOptions options = served.render_options;
  options.add_generation_prompt = false;
  return served.chat_template.render_json(variables.dump(), options);
}

TEST(ChatTools, EveryToolCallFormatRoundTripsThroughItsTemplate) {
  for (const std::string file :
       {"granite-4.0.jinja", "qwen3.jinja", "nemotron-nano-9b-v2.jinja", "nemotron-3-nano.jinja"}) {
    const ServedChatTemplate served = tools_template(file);
    ASSERT_NE(served.format.tools, ToolCallFormat::None) << file;
    const ordered_json calls = ordered_json::parse(
        R"([{"id": "a", "type": "function", "function": {"name": "get_weather", "arguments": {"city": "São Paulo", "days": 3}}},
            {"id": "b", "type": "function", "function": {"name": "get_weather", "arguments": {"city": "Oslo"}}}])");
    const ordered_json original = {{"role", "assistant"}, {"content", ""}, {"tool_calls", calls}};
    const std::string before = rendered_turn(served, ordered_json{{"role", "assistant"}, {"content", ""}});
    const std::string whole = rendered_turn(served, original);
    // The text the model would have written: where the turn departs from an empty assistant turn
    // up to the end (the parser takes the turn's end and the tool result as text).
    size_t common = 0;
    while (common < before.size() && common < whole.size() && before[common] == whole[common]) ++common;
    // The two turns may part inside a marker ("<|end_of_text|>" and "<tool_call>"): back to its start.
    while (common > 0 && whole[common - 1] != '>' && whole[common - 1] != '\n') --common;
    const std::string written = whole.substr(common);

    ChatParseOptions options;
    options.tool_names = {"get_weather"};
    ChatOutputParser parser(served.format, options);
    parser.feed(written);
    parser.finish();
    ASSERT_EQ(parser.tool_calls().size(), 2u) << file << ": " << written;
    ordered_json parsed_calls = ordered_json::array();
    for (size_t i = 0; i < 2; ++i) {
      EXPECT_EQ(parser.tool_calls()[i].name, "get_weather") << file;
      EXPECT_EQ(ordered_json::parse(parser.tool_calls()[i].arguments), calls[i]["function"]["arguments"])
          << file;
      parsed_calls.push_back({{"id", parser.tool_calls()[i].id},
                              {"type", "function"},
                              {"function",
                               {{"name", parser.tool_calls()[i].name},
                                {"arguments", ordered_json::parse(parser.tool_calls()[i].arguments)}}}});
    }
    // The parsed calls render back to the same turn.
    const ordered_json again = {{"role", "assistant"}, {"content", ""}, {"tool_calls", parsed_calls}};
    EXPECT_EQ(rendered_turn(served, again), whole) << file;
  }
}

}  // namespace
}  // namespace mb::server

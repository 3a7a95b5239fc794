// SPDX-License-Identifier: MIT
// /v1/messages (src/server/messages_api.h): every block type translated into the chat request,
// every refusal named, Anthropic's stream event order and response shape, and, against the real
// server, x-api-key, count_tokens, Anthropic-shaped errors and a follow-up that re-sends the
// whole conversation, served from the prefix cache and equal to a cold server's answer.
#include "server/messages_api.h"
#include "server/responses_api.h"

#include <gtest/gtest.h>
#include <httplib.h>

#include <string>
#include <vector>

#include "server_process.h"

namespace mb::server {
namespace {

using nlohmann::json;

std::string messages_chat_body(const std::string& body, bool count_only = false) {
  return translate_messages_request(body, count_only, 64).chat_body;
}

void expect_messages_400(const std::string& body, const std::string& fragment) {
  try {
    translate_messages_request(body, false, 64);
    ADD_FAILURE() << "accepted " << body;
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status, 400) << body;
    EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << body << " -> " << e.what();
  }
}

TEST(MessagesApi, TranslatesSystemBlocksToolsAndSettingsIntoAChatRequestInAFixedKeyOrder) {
  EXPECT_EQ(
      messages_chat_body(R"({"model": "m", "max_tokens": 9, "system": "Be brief.",
                                   "messages": [{"role": "user", "content": "Hi"}]})"),
      R"({"model":"m","messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"Hi"}],)"
      R"("max_tokens":9})");
  const std::string body =
      R"({"max_tokens": 20, "system": [{"type": "text", "text": "A"}, {"type": "text", "text": "B"}],
    "messages": [
      {"role": "user", "content": [{"type": "text", "text": "weather?"}]},
      {"role": "assistant", "content": [{"type": "thinking", "thinking": "t", "signature": "s"},
                                        {"type": "text", "text": "Checking."},
                                        {"type": "tool_use", "id": "toolu_1", "name": "get", "input": {"z": 1, "a": [2]}}]},
      {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": [{"type": "text", "text": "sunny"}]},
                                   {"type": "tool_result", "tool_use_id": "toolu_2", "content": "err", "is_error": true},
                                   {"type": "text", "text": "thanks"}]}],
    "tools": [{"name": "get", "description": "Gets.", "input_schema": {"type": "object", "properties": {"z": {}, "a": {}}}}],
    "tool_choice": {"type": "any", "disable_parallel_tool_use": true},
    "stop_sequences": ["END"], "temperature": 0.5, "top_p": 0.9, "top_k": 4, "stream": true,
    "thinking": {"type": "enabled", "budget_tokens": 1024}, "metadata": {"user_id": "u"}})";
  const MessagesRequest translated = translate_messages_request(body, false, 64);
  EXPECT_EQ(
      translated.chat_body,
      R"({"messages":[{"role":"system","content":[{"type":"text","text":"A"},{"type":"text","text":"B"}]},)"
      R"({"role":"user","content":"weather?"},)"
      R"({"role":"assistant","content":"Checking.","tool_calls":[{"id":"toolu_1","type":"function",)"
      R"("function":{"name":"get","arguments":"{\"z\":1,\"a\":[2]}"}}]},)"
      R"({"role":"tool","tool_call_id":"toolu_1","content":"sunny"},)"
      R"({"role":"tool","tool_call_id":"toolu_2","content":"err"},{"role":"user","content":"thanks"}],)"
      R"("tools":[{"type":"function","function":{"name":"get","description":"Gets.",)"
      R"("parameters":{"type":"object","properties":{"z":{},"a":{}}}}}],)"
      R"("tool_choice":"required","parallel_tool_calls":false,"max_tokens":20,"stop":["END"],)"
      R"("temperature":0.5,"top_p":0.9,"top_k":4,"chat_template_kwargs":{"enable_thinking":true},"stream":true})");
  EXPECT_EQ(translated.stops, std::vector<std::string>{"END"});
  EXPECT_NE(messages_chat_body(R"({"max_tokens": 1, "messages": [{"role": "user", "content": "x"}],
                                   "tool_choice": {"type": "tool", "name": "get"}})")
                .find(R"("tool_choice":{"type":"function","function":{"name":"get"}})"),
            std::string::npos);
  // count_tokens takes no max_tokens and never streams.
  EXPECT_EQ(messages_chat_body(R"({"messages": [{"role": "user", "content": "x"}], "stream": true})", true),
            R"({"messages":[{"role":"user","content":"x"}]})");
}

TEST(MessagesApi, RefusesWhatItCannotHonourByName) {
  const std::string user = R"("messages": [{"role": "user", "content": "x"}])";
  expect_messages_400("{" + user + "}", "max_tokens is required");
  expect_messages_400(R"({"max_tokens": 0, )" + user + "}", "max_tokens must be an integer >= 1");
  expect_messages_400(R"({"max_tokens": 5})", "messages is required");
  expect_messages_400(R"({"max_tokens": 5, "messages": []})", "messages must not be empty");
  expect_messages_400(R"({"max_tokens": 5, "messages": [{"role": "system", "content": "x"}]})",
                      "messages[0].role must be user or assistant");
  expect_messages_400(
      R"({"max_tokens": 5, "messages": [{"role": "user", "content": [{"type": "image", "source": {}}]}]})",
      "messages[0].content[0] is a 'image' block");
  expect_messages_400(
      R"({"max_tokens": 5, "messages": [{"role": "user", "content": [{"type": "document"}]}]})",
      "'document' block");
  expect_messages_400(
      R"({"max_tokens": 5, "messages": [{"role": "user", "content": [{"type": "tool_use", "id": "a", "name": "b", "input": {}}]}]})",
      "is a 'tool_use' block in a user message");
  expect_messages_400(
      R"({"max_tokens": 5, "messages": [{"role": "assistant", "content": [{"type": "tool_use", "id": "a", "name": "b", "input": 3}]}]})",
      "messages[0].content[0].input must be an object");
  expect_messages_400(R"({"max_tokens": 5, )" + user +
                          R"(, "tools": [{"type": "web_search_20250305", "name": "web_search"}]})",
                      "tools[0] is a server tool");
  expect_messages_400(R"({"max_tokens": 5, )" + user + R"(, "tools": [{"name": "f"}]})",
                      "tools[0].input_schema must be a JSON schema object");
  expect_messages_400(R"({"max_tokens": 5, )" + user + R"(, "tool_choice": {"type": "some"}})",
                      "tool_choice.type must be auto, any, tool or none");
  expect_messages_400(R"({"max_tokens": 5, )" + user + R"(, "system": [{"type": "image"}]})",
                      "system[0] is a 'image' block");
  expect_messages_400(R"({"max_tokens": 5, )" + user + R"(, "stop_sequences": "END"})",
                      "stop_sequences must be a list");
  expect_messages_400(R"({"max_tokens": 5, )" + user + R"(, "thinking": {"type": "maybe"}})",
                      "thinking.type must be");
  EXPECT_EQ(anthropic_error_json(404, "no such thing"),
            R"({"type":"error","error":{"type":"not_found_error","message":"no such thing"}})");
  EXPECT_STREQ(anthropic_error_type(401), "authentication_error");
  EXPECT_STREQ(anthropic_error_type(503), "overloaded_error");
}

class MessagesScript : public ReplySplitter {
 public:
  explicit MessagesScript(std::vector<ChatDelta> script) : script_(std::move(script)) {}
  ChatDelta feed(std::string_view) override {
    return next_ < script_.size() ? script_[next_++] : ChatDelta{};
  }
  ChatDelta finish() override { return {}; }

 private:
  std::vector<ChatDelta> script_;
  size_t next_ = 0;
};

ServeEvent messages_token(const std::string& text) {
  ServeEvent event;
  event.text = text;
  return event;
}

ServeEvent messages_done(StopReason reason) {
  ServeEvent event;
  event.kind = ServeEvent::Kind::Done;
  event.stop_reason = reason;
  event.prompt_tokens = 12;
  event.cached_tokens = 5;
  event.completion_tokens = 3;
  return event;
}

TEST(MessagesApi, StreamsAnthropicsEventSequenceAndAnswersInItsShape) {
  ChatDelta thought, text, call;
  thought.reasoning = "hm";
  text.content = "Sure.";
  ChatDelta::ToolCallPiece piece;
  piece.id = "call_9";
  piece.name = "get";
  piece.arguments = "{\"city\":\"Oslo\"}";
  call.tool_calls.push_back(piece);
  ApiRequest request;
  request.model = "m";
  request.serve.prompt = {1, 2, 3};
  MessagesRequest translated;
  MessagesFormatter streamed(
      request, translated, std::make_unique<MessagesScript>(std::vector{thought, text, call}), "msg_1", true);
  std::string out = streamed.stream_prelude();
  for (const char* t : {"a", "b", "c"}) out += streamed.stream_event(messages_token(t));
  out += streamed.stream_event(messages_done(StopReason::Eos));
  std::vector<std::string> names;
  std::vector<json> events;
  for (size_t at = 0; (at = out.find("event: ", at)) != std::string::npos;) {
    const size_t line = out.find('\n', at);
    names.push_back(out.substr(at + 7, line - at - 7));
    const size_t end = out.find("\n\n", line);
    events.push_back(json::parse(out.substr(line + 7, end - line - 7)));
    EXPECT_EQ(events.back()["type"], names.back());
    at = end;
  }
  const std::vector<std::string> expected = {"message_start",       "ping",
                                             "content_block_start", "content_block_delta",
                                             "content_block_stop",  "content_block_start",
                                             "content_block_delta", "content_block_stop",
                                             "content_block_start", "content_block_delta",
                                             "content_block_stop",  "message_delta",
                                             "message_stop"};
  EXPECT_EQ(names, expected);
  EXPECT_EQ(events[0]["message"]["usage"]["input_tokens"], 3);
  EXPECT_EQ(events[2]["content_block"]["type"], "thinking");
  EXPECT_EQ(events[3]["delta"]["type"], "thinking_delta");
  EXPECT_EQ(events[6]["delta"], json({{"type", "text_delta"}, {"text", "Sure."}}));
  EXPECT_EQ(events[8]["content_block"],
            json({{"type", "tool_use"}, {"id", "call_9"}, {"name", "get"}, {"input", json::object()}}));
  EXPECT_EQ(events[9]["delta"]["partial_json"], "{\"city\":\"Oslo\"}");
  EXPECT_EQ(events[8]["index"], 2);
  EXPECT_EQ(events[11]["delta"]["stop_reason"], "tool_use");
  EXPECT_EQ(events[11]["usage"]["output_tokens"], 3);
  EXPECT_EQ(events[11]["usage"]["cache_read_input_tokens"], 5);
  EXPECT_EQ(events[11]["usage"]["input_tokens"], 7);

  MessagesFormatter plain(request, translated,
                          std::make_unique<MessagesScript>(std::vector{thought, text, call}), "msg_2", false);
  for (const char* t : {"a", "b", "c"}) plain.collect(messages_token(t));
  plain.collect(messages_done(StopReason::Eos));
  const json message = plain.response();
  EXPECT_EQ(message["type"], "message");
  EXPECT_EQ(message["role"], "assistant");
  EXPECT_EQ(message["stop_reason"], "tool_use");
  ASSERT_EQ(message["content"].size(), 3u);
  EXPECT_EQ(message["content"][2]["input"]["city"], "Oslo");
  EXPECT_EQ(message["usage"]["cache_read_input_tokens"], 5);

  MessagesRequest with_stop;
  with_stop.stops = {"END", "STOP"};
  MessagesFormatter stopped(request, with_stop, make_reply_splitter(request, ServedChatTemplate{}), "msg_3",
                            false);
  stopped.collect(messages_token("so"));
  ServeEvent stop_done = messages_done(StopReason::StopString);
  stop_done.stop_string = "STOP";  // of several, the one the scheduler says matched
  stopped.collect(stop_done);
  EXPECT_EQ(stopped.response()["stop_reason"], "stop_sequence");
  EXPECT_EQ(stopped.response()["stop_sequence"], "STOP");
  EXPECT_EQ(stopped.response()["content"][0]["text"], "so");
}

// A Granite-format reply through the real chat output parser: reasoning, text and a tool call
// arriving in small pieces become thinking, text and tool_use blocks (stop_reason tool_use), and
// the same pieces through /v1/responses become reasoning, message and function_call items.
TEST(MessagesApi, TheChatOutputParsersSplitBecomesContentBlocksAndOutputItems) {
  ChatFormat format;
  format.tools = ToolCallFormat::JsonInToolCallTags;
  format.think_open = "<think>";
  format.think_close = "</think>";
  ChatParseOptions options;
  options.tool_names = {"get_weather"};
  const std::string reply =
      "<think>Oslo?</think>Let me check.<tool_call>{\"name\": \"get_weather\", \"arguments\": {\"city\": "
      "\"Oslo\"}}</tool_call>";
  ApiRequest request;
  MessagesFormatter messages(request, MessagesRequest{}, parser_splitter(ChatOutputParser(format, options)),
                             "msg_p", false);
  ResponseStore store;
  ResponsesFormatter responses(request, translate_responses_request(R"({"input": "q"})", &store, 8), &store,
                               parser_splitter(ChatOutputParser(format, options)), "resp_p", 3, 0, false);
  for (size_t at = 0; at < reply.size(); at += 5) {
    messages.collect(messages_token(reply.substr(at, 5)));
    responses.collect(messages_token(reply.substr(at, 5)));
  }
  messages.collect(messages_done(StopReason::Eos));
  responses.collect(messages_done(StopReason::Eos));
  const json message = messages.response();
  ASSERT_EQ(message["content"].size(), 3u) << message.dump();
  EXPECT_EQ(message["content"][0]["thinking"], "Oslo?");
  EXPECT_EQ(message["content"][1]["text"], "Let me check.");
  EXPECT_EQ(message["content"][2]["type"], "tool_use");
  EXPECT_EQ(message["content"][2]["name"], "get_weather");
  EXPECT_EQ(message["content"][2]["input"], json({{"city", "Oslo"}}));
  EXPECT_EQ(message["stop_reason"], "tool_use");
  const json response = responses.response();
  ASSERT_EQ(response["output"].size(), 3u) << response.dump();
  EXPECT_EQ(response["output"][0]["type"], "reasoning");
  EXPECT_EQ(response["output"][1]["content"][0]["text"], "Let me check.");
  EXPECT_EQ(response["output"][2]["type"], "function_call");
  EXPECT_EQ(json::parse(response["output"][2]["arguments"].get<std::string>()), json({{"city", "Oslo"}}));
  EXPECT_TRUE(response["output"][2]["call_id"].get<std::string>().starts_with("call_"));
}

// The trained demo model (data/demo-model): its replies are varied text, so equal answers
// compare something.
std::string messages_demo_model() {
  return std::string(MB_TEST_DATA_DIR) + "/../../data/demo-model";
}

httplib::Result messages_post(const test::ServerProcess& server, const std::string& path, const json& body,
                              const std::string& key = "") {
  httplib::Client client("127.0.0.1", server.port());
  client.set_read_timeout(120, 0);
  httplib::Headers headers = {{"anthropic-version", "2023-06-01"}};
  if (!key.empty()) headers.emplace("x-api-key", key);
  return client.Post(path.c_str(), headers, body.dump(), "application/json");
}

TEST(MessagesServe, AReSentConversationIsServedFromTheCacheAndEqualsAColdServer) {
  const json first = {{"max_tokens", 12},
                      {"temperature", 0.8},
                      {"seed", 11},
                      {"ignore_eos", true},
                      {"system", "Be brief."},
                      {"messages", {{{"role", "user"}, {"content", "Hi there"}}}}};
  json follow_up = first;
  json warm;
  {
    test::ServerProcess server(messages_demo_model(), "-t 1 --api-key sekrit");
    ASSERT_GT(server.port(), 0);
    // Without the key: 401 in Anthropic's shape.
    const auto refused = messages_post(server, "/v1/messages", first);
    ASSERT_TRUE(refused);
    EXPECT_EQ(refused->status, 401);
    const json error = json::parse(refused->body);
    EXPECT_EQ(error["type"], "error");
    EXPECT_EQ(error["error"]["type"], "authentication_error");
    // A bad body: 400 in Anthropic's shape.
    const auto bad = messages_post(server, "/v1/messages", {{"messages", first["messages"]}}, "sekrit");
    ASSERT_TRUE(bad);
    EXPECT_EQ(bad->status, 400);
    EXPECT_EQ(json::parse(bad->body)["error"]["type"], "invalid_request_error");
    EXPECT_NE(bad->body.find("max_tokens is required"), std::string::npos) << bad->body;

    const auto res = messages_post(server, "/v1/messages", first, "sekrit");
    ASSERT_TRUE(res);
    ASSERT_EQ(res->status, 200) << res->body;
    const json reply = json::parse(res->body);
    EXPECT_EQ(reply["type"], "message");
    EXPECT_EQ(reply["stop_reason"], "max_tokens");
    EXPECT_EQ(reply["usage"]["output_tokens"], 12);
    const int64_t first_prompt = reply["usage"]["input_tokens"].get<int64_t>() +
                                 reply["usage"]["cache_read_input_tokens"].get<int64_t>();
    const auto counted = messages_post(server, "/v1/messages/count_tokens",
                                       {{"system", "Be brief."}, {"messages", first["messages"]}}, "sekrit");
    ASSERT_TRUE(counted);
    EXPECT_EQ(json::parse(counted->body)["input_tokens"], first_prompt) << counted->body;

    follow_up["messages"].push_back({{"role", "assistant"}, {"content", reply["content"]}});
    follow_up["messages"].push_back({{"role", "user"}, {"content", "And then?"}});
    const auto again = messages_post(server, "/v1/messages", follow_up, "sekrit");
    ASSERT_TRUE(again);
    warm = json::parse(again->body);
    EXPECT_GE(warm["usage"]["cache_read_input_tokens"].get<int64_t>(), first_prompt) << again->body;

    // The same follow-up streamed: Anthropic's events, the same text.
    json streamed = follow_up;
    streamed["stream"] = true;
    const auto stream = messages_post(server, "/v1/messages", streamed, "sekrit");
    ASSERT_TRUE(stream);
    std::string text;
    for (size_t at = 0; (at = stream->body.find("data: ", at)) != std::string::npos;) {
      const size_t end = stream->body.find("\n\n", at);
      const json event = json::parse(stream->body.substr(at + 6, end - at - 6));
      if (event["type"] == "content_block_delta") text += event["delta"]["text"].get<std::string>();
      at = end;
    }
    const std::string end = "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n";
    EXPECT_TRUE(stream->body.ends_with(end)) << stream->body;
    EXPECT_EQ(stream->body.find("event: message_start\n"), 0u) << stream->body;
    EXPECT_EQ(text, warm["content"][0]["text"]);
    EXPECT_EQ(server.terminate(), 0);
  }
  test::ServerProcess cold_server(messages_demo_model(), "-t 2");
  ASSERT_GT(cold_server.port(), 0);
  const auto res = messages_post(cold_server, "/v1/messages", follow_up);
  ASSERT_TRUE(res);
  const json cold = json::parse(res->body);
  EXPECT_EQ(cold["usage"]["cache_read_input_tokens"], 0);
  EXPECT_EQ(
      cold["usage"]["input_tokens"].get<int64_t>(),
      warm["usage"]["input_tokens"].get<int64_t>() + warm["usage"]["cache_read_input_tokens"].get<int64_t>());
  EXPECT_EQ(cold["content"], warm["content"]);
  EXPECT_GT(cold["content"][0]["text"].get<std::string>().size(), 12u);
  EXPECT_EQ(cold_server.terminate(), 0);
}

// One path: a /v1/messages request and a /v1/responses request render the same prompt as the
// chat-completions request they translate into, so each resumes the whole of it from the state
// the chat request left in the prefix cache.
TEST(MessagesServe, BothAgentApisRenderTheChatRequestsPromptAndResumeItFromTheCache) {
  test::ServerProcess server(messages_demo_model(), "-t 1");
  ASSERT_GT(server.port(), 0);
  httplib::Client client("127.0.0.1", server.port());
  client.set_read_timeout(120, 0);
  const json chat = {{"messages",
                      {{{"role", "system"}, {"content", "Be brief."}},
                       {{"role", "user"}, {"content", "Who begat whom?"}},
                       {{"role", "assistant"}, {"content", "Adam begat Seth."}},
                       {{"role", "user"}, {"content", "And then?"}}}},
                     {"max_tokens", 1}};
  const auto chat_res = client.Post("/v1/chat/completions", chat.dump(), "application/json");
  ASSERT_TRUE(chat_res);
  const int64_t prompt_tokens = json::parse(chat_res->body)["usage"]["prompt_tokens"];
  const json messages = {
      {"max_tokens", 1},
      {"system", "Be brief."},
      {"messages",
       {{{"role", "user"}, {"content", "Who begat whom?"}},
        {{"role", "assistant"}, {"content", {{{"type", "text"}, {"text", "Adam begat Seth."}}}}},
        {{"role", "user"}, {"content", "And then?"}}}}};
  const auto messages_res = messages_post(server, "/v1/messages", messages);
  ASSERT_TRUE(messages_res);
  const json usage = json::parse(messages_res->body)["usage"];
  EXPECT_EQ(usage["cache_read_input_tokens"], prompt_tokens) << messages_res->body;
  EXPECT_EQ(usage["input_tokens"], 0) << messages_res->body;
  const json responses = {
      {"max_output_tokens", 1},
      {"instructions", "Be brief."},
      {"input",
       {{{"role", "user"}, {"content", "Who begat whom?"}},
        {{"type", "message"},
         {"role", "assistant"},
         {"content", {{{"type", "output_text"}, {"text", "Adam begat Seth."}}}}},
        {{"role", "user"}, {"content", {{{"type", "input_text"}, {"text", "And then?"}}}}}}}};
  const auto responses_res = client.Post("/v1/responses", responses.dump(), "application/json");
  ASSERT_TRUE(responses_res);
  const json responses_usage = json::parse(responses_res->body)["usage"];
  EXPECT_EQ(responses_usage["input_tokens"], prompt_tokens) << responses_res->body;
  EXPECT_EQ(responses_usage["input_tokens_details"]["cached_tokens"], prompt_tokens) << responses_res->body;
  EXPECT_EQ(server.terminate(), 0);
}

}  // namespace
}  // namespace mb::server

// SPDX-License-Identifier: MIT
// /v1/responses (src/server/responses_api.h): every input item and tool shape translated into the
// chat request, every refusal named, the response store's bounds, the typed stream events in
// OpenAI's order, and, against the real server, a previous_response_id follow-up served from the
// prefix cache that equals a cold server's answer.
#include "server/responses_api.h"

#include <gtest/gtest.h>
#include <httplib.h>

#include <string>
#include <vector>

#include "server_process.h"

namespace mb::server {
namespace {

using nlohmann::json;
using ojson = nlohmann::ordered_json;

std::string responses_chat_body(const std::string& body, ResponseStore* store = nullptr) {
  return translate_responses_request(body, store, 64).chat_body;
}

void expect_responses_400(const std::string& body, const std::string& fragment,
                          const std::string& code = "") {
  try {
    translate_responses_request(body, nullptr, 64);
    ADD_FAILURE() << "accepted " << body;
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status, 400) << body;
    EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << body << " -> " << e.what();
    if (!code.empty()) EXPECT_EQ(e.code, code) << body;
  }
}

TEST(ResponsesApi, TranslatesInputItemsToolsAndSettingsIntoAChatRequestInAFixedKeyOrder) {
  EXPECT_EQ(
      responses_chat_body(
          R"({"model": "m", "input": "Hi", "instructions": "Be brief.", "max_output_tokens": 5})"),
      R"({"model":"m","messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"Hi"}],)"
      R"("max_tokens":5})");
  // Message items (type optional), developer as system, text parts (one part: a string),
  // function calls folded into the assistant message before them, their outputs as tool messages,
  // reasoning items left out as chat templates leave earlier reasoning out.
  const std::string body = R"({"input": [
      {"role": "developer", "content": "Rules."},
      {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "a"}, {"type": "input_text", "text": "b"}]},
      {"type": "reasoning", "id": "rs_1", "summary": []},
      {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Let me look."}]},
      {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{\"z\":1,\"a\":2}"},
      {"type": "function_call", "call_id": "c2", "name": "g", "arguments": "{}"},
      {"type": "function_call_output", "call_id": "c1", "output": "one"},
      {"type": "function_call_output", "call_id": "c2", "output": [{"type": "input_text", "text": "two"}]}],
    "tools": [{"type": "function", "name": "f", "description": "F.", "parameters": {"type": "object", "properties": {"z": {}, "a": {}}}, "strict": true}],
    "tool_choice": {"type": "function", "name": "f"}, "parallel_tool_calls": false,
    "temperature": 0, "top_p": 0.5, "stream": true, "store": false, "metadata": {"k": "v"}})";
  const ResponsesRequest translated = translate_responses_request(body, nullptr, 64);
  EXPECT_EQ(
      translated.chat_body,
      R"({"messages":[{"role":"system","content":"Rules."},)"
      R"({"role":"user","content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]},)"
      R"({"role":"assistant","content":"Let me look.","tool_calls":[)"
      R"({"id":"c1","type":"function","function":{"name":"f","arguments":"{\"z\":1,\"a\":2}"}},)"
      R"({"id":"c2","type":"function","function":{"name":"g","arguments":"{}"}}]},)"
      R"({"role":"tool","tool_call_id":"c1","content":"one"},{"role":"tool","tool_call_id":"c2","content":"two"}],)"
      R"("tools":[{"type":"function","function":{"name":"f","description":"F.",)"
      R"("parameters":{"type":"object","properties":{"z":{},"a":{}}}}}],)"
      R"("tool_choice":{"type":"function","function":{"name":"f"}},"parallel_tool_calls":false,)"
      R"("temperature":0,"top_p":0.5,"stream":true})");
  EXPECT_FALSE(translated.store);
  EXPECT_EQ(translated.echo["metadata"]["k"], "v");
  EXPECT_EQ(translated.echo["parallel_tool_calls"], false);
  EXPECT_EQ(translated.conversation.size(), 5u);
  // A call with no message before it is an assistant message of its own, content null.
  EXPECT_EQ(responses_chat_body(R"({"input": [{"role": "user", "content": "q"},
      {"type": "function_call", "call_id": "c", "name": "f", "arguments": "{}"}]})"),
            R"({"messages":[{"role":"user","content":"q"},{"role":"assistant","content":null,"tool_calls":[)"
            R"({"id":"c","type":"function","function":{"name":"f","arguments":"{}"}}]}]})");
  EXPECT_EQ(
      responses_chat_body(
          R"({"input": "x", "text": {"format": {"type": "json_schema", "name": "n", "schema": {"type": "object"}, "strict": true}}})"),
      R"({"messages":[{"role":"user","content":"x"}],"response_format":{"type":"json_schema",)"
      R"("json_schema":{"name":"n","schema":{"type":"object"},"strict":true}}})");
}

TEST(ResponsesApi, RefusesWhatItCannotHonourByName) {
  expect_responses_400("{", "not valid JSON");
  expect_responses_400(R"({"model": "m"})", "input is required");
  expect_responses_400(R"({"input": 5})", "input must be a string or a list of items");
  expect_responses_400(
      R"({"input": [{"role": "user", "content": [{"type": "input_image", "image_url": "x"}]}]})",
      "input[0].content[0] has type 'input_image'", "unsupported_content");
  expect_responses_400(
      R"({"input": [{"role": "user", "content": [{"type": "input_file", "file_id": "x"}]}]})",
      "'input_file'");
  expect_responses_400(R"({"input": [{"type": "web_search_call", "id": "w"}]})", "type 'web_search_call'",
                       "unsupported_item");
  expect_responses_400(R"({"input": [{"type": "item_reference", "id": "w"}]})", "'item_reference'");
  expect_responses_400(R"({"input": "x", "tools": [{"type": "web_search"}]})",
                       "tools[0] is a 'web_search' tool", "unsupported_tool");
  expect_responses_400(R"({"input": "x", "tools": [{"type": "file_search", "vector_store_ids": []}]})",
                       "'file_search'");
  expect_responses_400(R"({"input": "x", "tools": [{"type": "function"}]})", "tools[0].name is required");
  expect_responses_400(R"({"input": [{"role": "tool", "content": "x"}]})", "input[0].role must be");
  expect_responses_400(R"({"input": [{"type": "function_call", "name": "f", "arguments": "{}"}]})",
                       "input[0].call_id is required");
  expect_responses_400(R"({"input": [{"type": "function_call_output", "call_id": "c"}]})",
                       "input[0].output is required");
  expect_responses_400(R"({"input": "x", "background": true})", "background is not supported");
  expect_responses_400(R"({"input": "x", "conversation": "conv_1"})", "conversation is not supported");
  expect_responses_400(R"({"input": "x", "prompt": {"id": "p"}})", "prompt is not supported");
  expect_responses_400(R"({"input": "x", "tool_choice": "sometimes"})", "tool_choice must be");
  expect_responses_400(R"({"input": "x", "instructions": 3})", "instructions must be a string");
  expect_responses_400(R"({"input": "x", "store": "yes"})", "store must be true or false");
  expect_responses_400(R"({"input": "x", "previous_response_id": "resp_none"})",
                       "Previous response with id 'resp_none' not found", "previous_response_not_found");
  std::string many = R"({"input": [)";
  for (int i = 0; i < 65; ++i) many += std::string(i ? "," : "") + R"({"role": "user", "content": "x"})";
  expect_responses_400(many + "]}", "more than the 64");
}

TEST(ResponsesApi, TheStoreContinuesAConversationAndDropsTheLeastRecentlyUsed) {
  ResponseStore store(2, 1000);
  store.put("a", ojson::array({{{"role", "user"}, {"content", "1"}}}));
  store.put("b", ojson::array());
  ASSERT_TRUE(store.get("a"));  // a is now the most recently used
  store.put("c", ojson::array());
  EXPECT_TRUE(store.get("a"));
  EXPECT_FALSE(store.get("b"));
  EXPECT_EQ(store.size(), 2u);
  store.put("big", ojson::array({{{"role", "user"}, {"content", std::string(2000, 'x')}}}));
  EXPECT_FALSE(store.get("big"));  // larger than the whole budget: not kept
  // A follow-up continues the stored conversation; the earlier instructions are not carried over.
  const std::string follow_up =
      responses_chat_body(R"({"previous_response_id": "a", "input": "2", "instructions": "New."})", &store);
  EXPECT_EQ(follow_up, R"({"messages":[{"role":"system","content":"New."},{"role":"user","content":"1"},)"
                       R"({"role":"user","content":"2"}]})");
}

// Hands out a scripted split of the reply, one delta per feed, whatever the text.
class ResponsesScriptedSplit : public ReplySplitter {
 public:
  explicit ResponsesScriptedSplit(std::vector<ChatDelta> script) : script_(std::move(script)) {}
  ChatDelta feed(std::string_view) override {
    return next_ < script_.size() ? script_[next_++] : ChatDelta{};
  }
  ChatDelta finish() override { return {}; }

 private:
  std::vector<ChatDelta> script_;
  size_t next_ = 0;
};

std::vector<ChatDelta> responses_reply_script() {
  ChatDelta thought, text, call, more;
  thought.reasoning = "hmm";
  text.content = "Hello";
  ChatDelta::ToolCallPiece piece;
  piece.index = 0;
  piece.id = "call_1";
  piece.name = "f";
  piece.arguments = "{\"a\":";
  call.tool_calls.push_back(piece);
  piece.id.clear();
  piece.name.clear();
  piece.arguments = "1}";
  more.tool_calls.push_back(piece);
  return {thought, text, call, more};
}

ServeEvent responses_token_event(const std::string& text) {
  ServeEvent event;
  event.text = text;
  return event;
}

ServeEvent responses_done_event(StopReason reason) {
  ServeEvent event;
  event.kind = ServeEvent::Kind::Done;
  event.stop_reason = reason;
  event.prompt_tokens = 10;
  event.cached_tokens = 4;
  event.completion_tokens = 4;
  return event;
}

TEST(ResponsesApi, StreamsTypedEventsInOrderAndStoresTheConversation) {
  ResponseStore store;
  ApiRequest request;
  request.model = "m";
  ResponsesRequest translated = translate_responses_request(R"({"input": "q"})", &store, 64);
  ResponsesFormatter formatter(request, translated, &store,
                               std::make_unique<ResponsesScriptedSplit>(responses_reply_script()), "resp_1",
                               7, 100, true);
  std::string text = formatter.stream_prelude();
  for (const char* piece : {"a", "b", "c", "d"}) text += formatter.stream_event(responses_token_event(piece));
  text += formatter.stream_event(responses_done_event(StopReason::Eos));
  ASSERT_TRUE(formatter.finished());
  std::vector<std::string> types;
  std::vector<json> events;
  for (size_t at = 0; (at = text.find("data: ", at)) != std::string::npos;) {
    const size_t end = text.find("\n\n", at);
    events.push_back(json::parse(text.substr(at + 6, end - at - 6)));
    types.push_back(events.back()["type"]);
    EXPECT_EQ(events.back()["sequence_number"], events.size() - 1);
    const size_t name = text.rfind("event: ", at);
    EXPECT_EQ(text.substr(name + 7, at - name - 8), types.back());
    at = end;
  }
  const std::vector<std::string> expected = {"response.created",
                                             "response.in_progress",
                                             "response.output_item.added",
                                             "response.reasoning_text.delta",
                                             "response.reasoning_text.done",
                                             "response.output_item.done",
                                             "response.output_item.added",
                                             "response.content_part.added",
                                             "response.output_text.delta",
                                             "response.output_text.done",
                                             "response.content_part.done",
                                             "response.output_item.done",
                                             "response.output_item.added",
                                             "response.function_call_arguments.delta",
                                             "response.function_call_arguments.delta",
                                             "response.function_call_arguments.done",
                                             "response.output_item.done",
                                             "response.completed"};
  EXPECT_EQ(types, expected);
  const json& done = events.back()["response"];
  EXPECT_EQ(done["status"], "completed");
  ASSERT_EQ(done["output"].size(), 3u);
  EXPECT_EQ(done["output"][0]["type"], "reasoning");
  EXPECT_EQ(done["output"][1]["content"][0]["text"], "Hello");
  EXPECT_EQ(done["output"][2]["type"], "function_call");
  EXPECT_EQ(done["output"][2]["call_id"], "call_1");
  EXPECT_EQ(done["output"][2]["arguments"], "{\"a\":1}");
  EXPECT_EQ(done["usage"]["input_tokens"], 10);
  EXPECT_EQ(done["usage"]["input_tokens_details"]["cached_tokens"], 4);
  EXPECT_EQ(done["usage"]["total_tokens"], 14);
  EXPECT_EQ(events[15]["arguments"], "{\"a\":1}");
  // The conversation kept: the input, then the reply's text and call as one assistant message.
  const auto kept = store.get("resp_1");
  ASSERT_TRUE(kept);
  EXPECT_EQ(kept->dump(),
            R"([{"role":"user","content":"q"},{"role":"assistant","content":"Hello","tool_calls":[)"
            R"({"id":"call_1","type":"function","function":{"name":"f","arguments":"{\"a\":1}"}}]}])");
}

TEST(ResponsesApi, APlainResponseIsIncompleteAtTheTokenLimitAndFailsWithTheError) {
  ApiRequest request;
  ResponsesRequest translated = translate_responses_request(R"({"input": "q", "store": false})", nullptr, 64);
  ResponseStore store;
  ResponsesFormatter formatter(request, translated, &store,
                               make_reply_splitter(request, ServedChatTemplate{}), "resp_2", 1, 100, false);
  formatter.collect(responses_token_event("Hi"));
  EXPECT_TRUE(
      formatter.stream_event(responses_token_event(" there")).empty());  // not streaming: no event text
  formatter.collect(responses_done_event(StopReason::MaxTokens));
  const json response = formatter.response();
  EXPECT_EQ(response["object"], "response");
  EXPECT_EQ(response["status"], "incomplete");
  EXPECT_EQ(response["incomplete_details"]["reason"], "max_output_tokens");
  EXPECT_EQ(response["output"][0]["content"][0]["text"], "Hi there");
  EXPECT_EQ(store.size(), 0u);  // store: false
  ResponsesFormatter failing(request, translated, &store, make_reply_splitter(request, ServedChatTemplate{}),
                             "resp_3", 1, 100, true);
  ServeEvent error;
  error.kind = ServeEvent::Kind::Error;
  error.error = "forward failed";
  const std::string text = failing.stream_event(error);
  EXPECT_NE(text.find("event: response.failed"), std::string::npos) << text;
  EXPECT_NE(text.find("forward failed"), std::string::npos) << text;
  EXPECT_THROW(failing.response(), ApiError);
}

// The trained demo model (data/demo-model): its replies are varied text, so equal answers
// compare something.
std::string responses_demo_model() {
  return std::string(MB_TEST_DATA_DIR) + "/../../data/demo-model";
}

json responses_post(const test::ServerProcess& server, const json& body, int expected_status = 200) {
  httplib::Client client("127.0.0.1", server.port());
  client.set_read_timeout(120, 0);
  const auto res = client.Post("/v1/responses", body.dump(), "application/json");
  EXPECT_TRUE(res);
  if (!res) return json();
  EXPECT_EQ(res->status, expected_status) << body.dump() << " -> " << res->body;
  return json::parse(res->body, nullptr, false);
}

// The follow-up through previous_response_id resumes from the state cached for the first turn and
// gives exactly the text a cold server gives for the whole conversation sent as items.
TEST(ResponsesServe, AFollowUpByPreviousResponseIdIsServedFromTheCacheAndEqualsAColdServer) {
  const json settings = {{"max_output_tokens", 12}, {"temperature", 0.8}, {"seed", 11}, {"ignore_eos", true}};
  json first = settings, follow_up = settings;
  first["input"] = "Hi there";
  first["instructions"] = "Be brief.";
  json first_reply, warm;
  {
    test::ServerProcess server(responses_demo_model(), "-t 1");
    ASSERT_GT(server.port(), 0);
    first_reply = responses_post(server, first);
    ASSERT_EQ(first_reply["object"], "response");
    EXPECT_EQ(first_reply["status"], "incomplete");  // max_output_tokens reached
    EXPECT_EQ(first_reply["instructions"], "Be brief.");
    follow_up["previous_response_id"] = first_reply["id"];
    follow_up["input"] = "And then?";
    follow_up["instructions"] = "Be brief.";
    warm = responses_post(server, follow_up);
    // An unknown id is refused as OpenAI does.
    json unknown = follow_up;
    unknown["previous_response_id"] = "resp_0000";
    const json refused = responses_post(server, unknown, 400);
    EXPECT_EQ(refused["error"]["code"], "previous_response_not_found");
    // store: false keeps nothing to continue.
    json unstored = first;
    unstored["store"] = false;
    const json kept_not = responses_post(server, unstored);
    unknown["previous_response_id"] = kept_not["id"];
    responses_post(server, unknown, 400);
    EXPECT_EQ(server.terminate(), 0);
  }
  ASSERT_TRUE(warm.contains("usage")) << warm.dump();
  const int64_t first_prompt = first_reply["usage"]["input_tokens"];
  EXPECT_GE(warm["usage"]["input_tokens_details"]["cached_tokens"].get<int64_t>(), first_prompt)
      << warm.dump();
  // The cold server is sent the conversation as items: the first input, the first output items,
  // the new input.
  json cold_request = settings;
  cold_request["instructions"] = "Be brief.";
  cold_request["input"] = json::array({{{"role", "user"}, {"content", "Hi there"}}});
  for (const json& item : first_reply["output"]) cold_request["input"].push_back(item);
  cold_request["input"].push_back({{"role", "user"}, {"content", "And then?"}});
  test::ServerProcess cold_server(responses_demo_model(), "-t 2");
  ASSERT_GT(cold_server.port(), 0);
  const json cold = responses_post(cold_server, cold_request);
  EXPECT_EQ(cold["usage"]["input_tokens_details"]["cached_tokens"], 0);
  EXPECT_EQ(cold["usage"]["input_tokens"], warm["usage"]["input_tokens"]);
  EXPECT_EQ(cold["output"][0]["content"][0]["text"], warm["output"][0]["content"][0]["text"]);
  EXPECT_EQ(cold["usage"]["output_tokens"], 12);
  EXPECT_GT(cold["output"][0]["content"][0]["text"].get<std::string>().size(), 12u);
  EXPECT_EQ(cold_server.terminate(), 0);
}

// The stream of a real request: OpenAI's typed events, in order, with the text of the plain answer.
TEST(ResponsesServe, StreamsTheSameTextAsThePlainAnswer) {
  test::ServerProcess server(test::server_test_model(), "-t 1");
  ASSERT_GT(server.port(), 0);
  const json body = {{"input", "Hello"}, {"max_output_tokens", 5}, {"temperature", 0}, {"ignore_eos", true}};
  const json plain = responses_post(server, body);
  httplib::Client client("127.0.0.1", server.port());
  json streamed_body = body;
  streamed_body["stream"] = true;
  const auto res = client.Post("/v1/responses", streamed_body.dump(), "application/json");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 200);
  EXPECT_EQ(res->get_header_value("Content-Type"), "text/event-stream");
  std::string text, last;
  int64_t sequence = 0;
  for (size_t at = 0; (at = res->body.find("data: ", at)) != std::string::npos;) {
    const size_t end = res->body.find("\n\n", at);
    const json event = json::parse(res->body.substr(at + 6, end - at - 6));
    EXPECT_EQ(event["sequence_number"], sequence++);
    if (event["type"] == "response.output_text.delta") text += event["delta"].get<std::string>();
    last = event["type"];
    at = end;
  }
  EXPECT_EQ(last, "response.incomplete");
  EXPECT_EQ(text, plain["output"][0]["content"][0]["text"]);
  EXPECT_EQ(server.terminate(), 0);
}

}  // namespace
}  // namespace mb::server

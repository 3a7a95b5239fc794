// SPDX-License-Identifier: MIT
// The OpenAI request parsing, validation and response formatting of src/server/openai_api.h,
// without sockets: every malformed, mistyped or out-of-range field is a 400 naming the field,
// unknown fields are ignored, and responses and server-sent events have OpenAI's shape.
#include "server/openai_api.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <sstream>
#include <string>

#include "common/test_util.h"
#include "common/timing.h"

namespace mb::server {
namespace {

using nlohmann::json;

const Tokenizer& api_tokenizer() {
  static const Tokenizer t = [] {
    const std::string path = test::make_temp_dir("openai_api") + "/tokenizer.json";
    write_byte_level_tokenizer_json(path, 400);
    return Tokenizer::from_json_file(path);
  }();
  return t;
}

ApiRequest parse(ApiKind kind, const std::string& body, const ApiDefaults& defaults = {}) {
  return parse_api_request(kind, body, defaults, 1234);
}

// The status and message of the ApiError that `body` provokes ("" when it parses).
std::pair<int, std::string> failure(ApiKind kind, const std::string& body, const ApiDefaults& defaults = {}) {
  try {
    ApiRequest request = parse(kind, body, defaults);
    resolve_prompt(request, api_tokenizer(), ServedChatTemplate{}, defaults);
  } catch (const ApiError& e) {
    return {e.status, e.what()};
  }
  return {0, ""};
}

void expect_400(ApiKind kind, const std::string& body, const std::string& fragment,
                const ApiDefaults& defaults = {}) {
  const auto [status, message] = failure(kind, body, defaults);
  EXPECT_EQ(status, 400) << body;
  EXPECT_NE(message.find(fragment), std::string::npos) << body << " -> " << message;
}

TEST(OpenAiApi, MalformedBodiesAre400WithTheParserMessage) {
  for (const std::string& body :
       std::vector<std::string>{"{", "", "{\"prompt\": }", "[1, 2]", "\"text\"", "{\"a\": 1e400}",
                                std::string(200, '[') + std::string(200, ']')}) {
    try {
      parse_request_body(body);
      ADD_FAILURE() << "accepted " << body.substr(0, 40);
    } catch (const ApiError& e) {
      EXPECT_EQ(e.status, 400);
      EXPECT_EQ(e.type, "invalid_request_error");
    }
  }
  // Invalid UTF-8 inside a string is malformed JSON too.
  EXPECT_THROW(parse_request_body("{\"prompt\": \"\xff\xfe\"}"), ApiError);
}

TEST(OpenAiApi, WrongTypesAreNamed) {
  const ApiKind c = ApiKind::Completion;
  expect_400(c, R"({"prompt": "hi", "temperature": "hot"})", "temperature must be a number, got \"hot\"");
  expect_400(c, R"({"prompt": "hi", "max_tokens": "5"})", "max_tokens must be an integer");
  expect_400(c, R"({"prompt": "hi", "max_tokens": 2.5})", "max_tokens must be an integer");
  expect_400(c, R"({"prompt": "hi", "stream": "yes"})", "stream must be true or false");
  expect_400(c, R"({"prompt": "hi", "stop": 5})", "stop must be a string or a list of strings");
  expect_400(c, R"({"prompt": "hi", "stop": ["a", 1]})", "stop must be a string or a list of strings");
  expect_400(c, R"({"prompt": {"text": "hi"}})", "prompt must be a string or a list of token ids");
  expect_400(c, R"({"prompt": [1, "x", 3]})", "only one prompt per request");
  expect_400(c, R"({"prompt": [1, 2.5]})", "a list of token ids");
  expect_400(c, R"({"prompt": "hi", "logprobs": true})", "logprobs must be an integer");
  expect_400(c, R"({"prompt": "hi", "seed": "7"})", "seed must be an integer");
  expect_400(c, R"({"prompt": "hi", "model": 3})", "model must be a string");
  expect_400(c, R"({"prompt": "hi", "stream_options": true})", "stream_options must be an object");
  expect_400(c, R"({"temperature": 1})", "prompt is required");
  const ApiKind chat = ApiKind::Chat;
  expect_400(chat, R"({"messages": "hi"})", "messages must be a list of messages");
  expect_400(chat, R"({"messages": []})", "messages must not be empty");
  expect_400(chat, R"({"messages": [{"content": "hi"}]})", "messages[0].role must be a non-empty string");
  expect_400(chat, R"({"messages": [{"role": "user", "content": 5}]})",
             "messages[0].content must be a string");
  expect_400(chat, R"({"messages": [{"role": "user", "content": [{"type": "image_url"}]}]})",
             "messages[0].content[0] is an image");
  expect_400(chat, R"({"messages": [{"role": "user", "content": "hi"}], "logprobs": 1})",
             "logprobs must be true or false");
  expect_400(chat, R"({"prompt": "hi"})", "messages is required");
}

TEST(OpenAiApi, OutOfRangeValuesAreNamedWithTheirRange) {
  const ApiKind c = ApiKind::Completion;
  expect_400(c, R"({"prompt": "hi", "temperature": -1})", "temperature must be finite and >= 0, got -1");
  expect_400(c, R"({"prompt": "hi", "top_p": 0})", "top_p must be in (0, 1]");
  expect_400(c, R"({"prompt": "hi", "top_p": 1.5})", "top_p must be in (0, 1]");
  expect_400(c, R"({"prompt": "hi", "top_k": -2})", "top_k must be >= 0");
  expect_400(c, R"({"prompt": "hi", "min_p": 2})", "min_p must be in [0, 1]");
  expect_400(c, R"({"prompt": "hi", "repeat_penalty": 0})", "repeat_penalty must be finite and > 0");
  expect_400(c, R"({"prompt": "hi", "max_tokens": -1})", "max_tokens must be in [0, 2147483647], got -1");
  expect_400(c, R"({"prompt": "hi", "max_tokens": 1e12})", "max_tokens must be in [0, 2147483647]");
  expect_400(c, R"({"prompt": "hi", "logprobs": 21})", "logprobs must be in [0, 20], got 21");
  expect_400(c, R"({"prompt": "hi", "n_probs": -1})", "n_probs must be in [0, 20]");
  expect_400(c, R"({"prompt": "hi", "seed": -3})", "seed must be an integer in [0, 2^64) or -1");
  expect_400(c, R"({"prompt": "hi", "n": 17})", "n must be in [1, 16], got 17");
  expect_400(c, R"({"prompt": "hi", "best_of": 3})", "best_of must be 1");
  expect_400(c, R"({"prompt": "hi", "echo": true})", "echo is not supported");
  expect_400(c, R"({"prompt": "hi", "presence_penalty": 2.5})", "presence_penalty must be in [-2, 2]");
  expect_400(c, R"({"prompt": "hi", "logit_bias": {"5": 101}})", "logit_bias[\"5\"] must be in [-100, 100]");
  expect_400(c, R"({"prompt": "hi", "stop": ""})", "stop strings must not be empty");
  expect_400(
      c, R"({"prompt": "hi", "stop": ["a","b","c","d","e","f","g","h","i","j","k","l","m","n","o","p","q"]})",
      "stop takes at most 16 strings, got 17");
  const ApiKind chat = ApiKind::Chat;
  const std::string messages = R"("messages": [{"role": "user", "content": "hi"}])";
  expect_400(chat, "{" + messages + R"(, "top_logprobs": 3})", "top_logprobs requires logprobs: true");
  expect_400(chat, "{" + messages + R"(, "logprobs": true, "top_logprobs": 30})",
             "top_logprobs must be in [0, 20]");
}

TEST(OpenAiApi, UnknownFieldsAndNullsAreIgnoredAndDefaultsApply) {
  const ApiRequest r =
      parse(ApiKind::Completion,
            R"({"prompt": "hi", "user": "u1", "vendor_extension": {"x": [1]}, "temperature": null,
                                 "n": 1, "echo": false, "presence_penalty": 0, "logit_bias": {}})");
  EXPECT_EQ(r.prompt_text, "hi");
  EXPECT_EQ(r.serve.sampling.temperature, SamplingParams{}.temperature);
  EXPECT_EQ(r.serve.sampling.seed, 1234u);  // the server's draw
  EXPECT_FALSE(r.stream);
  EXPECT_FALSE(r.logprobs);
  EXPECT_EQ(r.serve.n_probs, 0);
  EXPECT_TRUE(r.serve.stop_at_eos);

  const ApiRequest s = parse(ApiKind::Completion,
                             R"({"prompt": [5, 6], "seed": 18446744073709551615, "temperature": 0, "top_k": 5,
                                 "top_p": 0.5, "min_p": 0.1, "repeat_penalty": 1.1, "repeat_last_n": 8,
                                 "stop": "END", "max_tokens": 7.0, "ignore_eos": true, "stream": true,
                                 "stream_options": {"include_usage": true}, "logprobs": 3, "model": "m"})");
  EXPECT_EQ(s.prompt_ids, (std::vector<int32_t>{5, 6}));
  EXPECT_EQ(s.serve.sampling.seed, UINT64_MAX);
  EXPECT_EQ(s.serve.sampling.temperature, 0.0f);
  EXPECT_EQ(s.serve.sampling.top_k, 5);
  EXPECT_EQ(s.serve.sampling.top_p, 0.5f);
  EXPECT_EQ(s.serve.sampling.min_p, 0.1f);
  EXPECT_EQ(s.serve.sampling.repeat_penalty, 1.1f);
  EXPECT_EQ(s.serve.sampling.repeat_last_n, 8);
  EXPECT_EQ(s.serve.stop, std::vector<std::string>{"END"});
  EXPECT_EQ(s.serve.max_tokens, 7);
  EXPECT_FALSE(s.serve.stop_at_eos);
  EXPECT_TRUE(s.stream);
  EXPECT_TRUE(s.include_usage);
  EXPECT_TRUE(s.logprobs);
  EXPECT_EQ(s.serve.n_probs, 3);
  EXPECT_EQ(s.model, "m");
  EXPECT_EQ(parse(ApiKind::Completion, R"({"prompt": "hi", "seed": -1})").serve.sampling.seed, 1234u);
  // A list holding one prompt is that prompt.
  EXPECT_EQ(parse(ApiKind::Completion, R"({"prompt": ["hi"]})").prompt_text, "hi");
  EXPECT_EQ(parse(ApiKind::Completion, R"({"prompt": [[1, 2]]})").prompt_ids, (std::vector<int32_t>{1, 2}));
  // llama.cpp's n_probs asks for alternatives as well.
  const ApiRequest n = parse(ApiKind::Completion, R"({"prompt": "hi", "n_probs": 4})");
  EXPECT_TRUE(n.logprobs);
  EXPECT_EQ(n.serve.n_probs, 4);
  // max_completion_tokens is max_tokens' other name (request_surface_test.cc: both and different).
  EXPECT_EQ(parse(ApiKind::Chat, R"({"messages": [{"role": "user", "content": "x"}], "max_tokens": 9,
                                     "max_completion_tokens": 9})")
                .serve.max_tokens,
            9);
}

TEST(OpenAiApi, PromptsAreTokenizedAndCheckedAgainstTheContext) {
  ApiDefaults defaults;
  defaults.max_context = 64;
  defaults.vocab_size = 400;
  ApiRequest r = parse(ApiKind::Completion, R"({"prompt": "Hello world"})", defaults);
  resolve_prompt(r, api_tokenizer(), ServedChatTemplate{}, defaults);
  EXPECT_EQ(r.serve.prompt, api_tokenizer().encode("Hello world"));
  EXPECT_EQ(r.serve.max_tokens, 16);  // OpenAI's completion default

  // max_tokens is cut to the room the context leaves.
  ApiRequest cut = parse(ApiKind::Completion, R"({"prompt": [1, 2, 3, 4], "max_tokens": 100})", defaults);
  resolve_prompt(cut, api_tokenizer(), ServedChatTemplate{}, defaults);
  EXPECT_EQ(cut.serve.max_tokens, 60);

  // Chat: the plain format (text parts joined with "\n"), and max_tokens up to the context by default.
  ApiRequest chat = parse(ApiKind::Chat,
                          R"({"messages": [{"role": "system", "content": "Be brief."},
                                          {"role": "user", "content": [{"type": "text", "text": "Hi"},
                                                                       {"type": "text", "text": "!"}]}]})",
                          defaults);
  resolve_prompt(chat, api_tokenizer(), ServedChatTemplate{}, defaults);
  EXPECT_EQ(chat.serve.prompt, api_tokenizer().encode("system: Be brief.\nuser: Hi\n!\nassistant:"));
  EXPECT_EQ(chat.serve.max_tokens, 64 - static_cast<int>(chat.serve.prompt.size()));
  ApiRequest unbounded = parse(ApiKind::Chat, R"({"messages": [{"role": "user", "content": "x"}]})");
  resolve_prompt(unbounded, api_tokenizer(), ServedChatTemplate{}, {});
  EXPECT_EQ(unbounded.serve.max_tokens, ApiDefaults{}.chat_max_tokens_without_context);

  const ApiKind c = ApiKind::Completion;
  expect_400(c, R"({"prompt": ""})", "the prompt is empty", defaults);
  expect_400(c, R"({"prompt": []})", "the prompt is empty", defaults);
  expect_400(c, R"({"prompt": [1, 400]})", "prompt token id 400 is outside the vocabulary [0, 400)",
             defaults);
  expect_400(c, R"({"prompt": [-1]})", "outside the vocabulary", defaults);
  expect_400(c, R"({"prompt": ")" + std::string(200, 'x') + "\"}", "the context size (-c) is 64", defaults);
  const auto [status, message] = failure(c, R"({"prompt": ")" + std::string(64, 'q') + "\"}", defaults);
  EXPECT_EQ(status, 400);
  EXPECT_NE(message.find("no room is left to generate"), std::string::npos) << message;
}

TEST(OpenAiApi, EncodedPromptsAreBoundedLikeTokenIdPromptsBeforeTheyAreQueued) {
  // Without -c a text prompt was bounded only by the body size.
  ApiDefaults defaults;
  defaults.max_prompt_tokens_in_request = 8;
  const auto [status, message] =
      failure(ApiKind::Completion, R"({"prompt": ")" + std::string(40, 'q') + "\"}", defaults);
  EXPECT_EQ(status, 400);
  EXPECT_NE(message.find("more than the 8 a request may carry"), std::string::npos) << message;
  expect_400(ApiKind::Chat, R"({"messages": [{"role": "user", "content": ")" + std::string(40, 'q') + "\"}]}",
             "more than the 8 a request may carry", defaults);
  EXPECT_EQ(failure(ApiKind::Completion, R"({"prompt": "qq"})", defaults).first, 0);
}

// A body of `count` copies of `item` in the list `key`.
std::string body_with_list(const std::string& key, const std::string& item, int count) {
  std::string body = "{\"" + key + "\": [";
  for (int i = 0; i < count; ++i) body += (i ? "," : "") + item;
  return body + "]}";
}

TEST(OpenAiApi, HugeBodiesAreRefusedInLinearTime) {
  // The issue's reproducers: 10^6 small objects (8 MB) never got an answer, and 10^5 chat
  // messages took 8.8 s to be refused, because parsing was quadratic in the number of objects.
  const std::string objects = body_with_list("prompt", "{\"a\":1}", 1000000);
  double seconds = test::least_cpu_seconds(
      [&] { expect_400(ApiKind::Completion, objects, "more than 131072 arrays and objects"); }, 1);
  EXPECT_LT(seconds, 3.0);
  const std::string messages = body_with_list("messages", R"({"role": "user", "content": "hi"})", 100000);
  seconds = test::least_cpu_seconds(
      [&] { expect_400(ApiKind::Chat, messages, "messages holds 100000 messages, more than 4096"); }, 1);
  EXPECT_LT(seconds, 3.0);
  // Refusing 4x the messages takes about 4x the time (quadratic parsing took 16x).
  const std::string small = body_with_list("messages", R"({"role": "user", "content": "hi"})", 25000);
  const double growth = test::growth_for_4x(
      [&](int n) { expect_400(ApiKind::Chat, n == 25000 ? small : messages, "more than 4096"); }, 25000);
  EXPECT_LT(growth, 8.0);
}

TEST(OpenAiApi, AChatTemplateThatCannotRenderIsA400NamingTheTemplate) {
  ApiRequest chat = parse(ApiKind::Chat, R"({"messages": [{"role": "user", "content": "x"}]})");
  const ChatTemplate failing = ChatTemplate::parse("{{ raise_exception('System role not supported') }}");
  try {
    ServedChatTemplate served;
    served.chat_template = failing;
    resolve_prompt(chat, api_tokenizer(), served, {});
    FAIL() << "rendered";
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status, 400);
    EXPECT_EQ(e.code, "chat_template_error");
    EXPECT_NE(std::string(e.what()).find("chat template"), std::string::npos) << e.what();
  }
}

// The hybrids' published templates, in a model folder as each ships (Granite-4.0-H and
// Nemotron-Nano-9B-v2 in tokenizer_config.json, Nemotron-3-Nano in chat_template.jinja): a chat
// request's prompt is the encoding of Hugging Face's render of its messages, the golden of
// tests/data/chat_templates/goldens.json.
TEST(OpenAiApi, AHybridFoldersPublishedChatTemplateMakesTheChatPrompt) {
  const json goldens = json::parse(test::read_data_file("chat_templates/goldens.json"));
  int checked = 0;
  for (const std::string file : {"granite-4.0.jinja", "nemotron-nano-9b-v2.jinja",
                                 "nemotron-h-reasoning.jinja", "nemotron-3-nano.jinja"}) {
    const std::string dir = test::make_temp_dir("openai_api_hybrid_template");
    const std::string source = test::read_data_file("chat_templates/" + file);
    json config = {{"bos_token", "<s>"}, {"eos_token", "</s>"}};
    if (file == "nemotron-3-nano.jinja")
      std::ofstream(dir + "/chat_template.jinja", std::ios::binary) << source;
    else
      config["chat_template"] = source;
    std::ofstream(dir + "/tokenizer_config.json") << config.dump();
    const ServedChatTemplate served = load_served_chat_template(dir);
    ASSERT_EQ(served.error, "") << file;
    for (const json& c : goldens["cases"]) {
      // The server renders plain role/content messages with the generation prompt.
      if (c["template"] != file || !c["add_generation_prompt"].get<bool>() || c["variables"].size() != 1)
        continue;
      const json& messages = c["variables"]["messages"];
      if (!std::all_of(messages.begin(), messages.end(),
                       [](const json& m) { return m.size() == 2 && m["content"].is_string(); }))
        continue;
      const json body = {{"messages", messages}};
      const ApiRequest request =
          prepare_api_request(ApiKind::Chat, body.dump(), api_tokenizer(), served, {}, 1, "m");
      EXPECT_EQ(request.serve.prompt, api_tokenizer().encode(c["expected"].get<std::string>()))
          << file << " / " << c["conversation"];
      ++checked;
    }
  }
  EXPECT_GE(checked, 4 * 9);
}

ServeEvent token_event(int32_t id, std::string text, float logprob = -0.5f) {
  ServeEvent e;
  e.kind = ServeEvent::Kind::Token;
  e.token = id;
  e.text = std::move(text);
  e.logprob = logprob;
  e.top = {{id, logprob}, {id + 1, logprob - 1.0f}, {id + 2, logprob - 2.0f}};
  return e;
}

ServeEvent done_event(StopReason reason, std::string tail = "") {
  ServeEvent e;
  e.kind = ServeEvent::Kind::Done;
  e.text = std::move(tail);
  e.stop_reason = reason;
  e.prompt_tokens = 5;
  e.cached_tokens = 2;
  e.completion_tokens = 3;
  return e;
}

// The JSON objects of a server-sent event stream, and whether it ended with [DONE].
std::vector<json> sse_objects(const std::string& stream, bool& done) {
  std::vector<json> objects;
  done = false;
  size_t pos = 0;
  while (pos < stream.size()) {
    const size_t end = stream.find("\n\n", pos);
    EXPECT_NE(end, std::string::npos) << "an event without its blank line";
    if (end == std::string::npos) break;
    const std::string event = stream.substr(pos, end - pos);
    EXPECT_EQ(event.rfind("data: ", 0), 0u) << event;
    EXPECT_FALSE(done) << "an event after [DONE]";
    if (event == "data: [DONE]")
      done = true;
    else
      objects.push_back(json::parse(event.substr(6)));
    pos = end + 2;
  }
  return objects;
}

TEST(OpenAiApi, CompletionResponsesHaveTextUsageAndLogprobs) {
  const ApiRequest request =
      parse(ApiKind::Completion, R"({"prompt": "hi", "logprobs": 2, "model": "tiny"})");
  ResponseFormatter formatter(request, api_tokenizer(), "cmpl-1", 1700000000);
  formatter.collect(token_event(72, "H"));
  formatter.collect(token_event(105, "i"));
  EXPECT_FALSE(formatter.finished());
  formatter.collect(done_event(StopReason::MaxTokens, "!"));
  ASSERT_TRUE(formatter.finished());
  const json r = formatter.response();
  EXPECT_EQ(r["object"], "text_completion");
  EXPECT_EQ(r["id"], "cmpl-1");
  EXPECT_EQ(r["model"], "tiny");
  EXPECT_EQ(r["created"], 1700000000);
  EXPECT_EQ(r["choices"][0]["text"], "Hi!");
  EXPECT_EQ(r["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(r["usage"], json::parse(R"({"prompt_tokens": 5, "completion_tokens": 3, "total_tokens": 8,
                                        "prompt_tokens_details": {"cached_tokens": 2}})"));
  const json& logprobs = r["choices"][0]["logprobs"];
  ASSERT_EQ(logprobs["tokens"].size(), 2u);
  EXPECT_EQ(logprobs["tokens"][0], api_tokenizer().decode(std::vector<int32_t>{72}));
  EXPECT_FLOAT_EQ(logprobs["token_logprobs"][1].get<float>(), -0.5f);
  EXPECT_EQ(logprobs["top_logprobs"][0].size(), 2u);  // two alternatives asked for, three offered
  EXPECT_EQ(logprobs["text_offset"], json::parse("[0, 1]"));

  ResponseFormatter stopped(parse(ApiKind::Completion, R"({"prompt": "hi"})"), api_tokenizer(), "cmpl-2", 0);
  stopped.collect(done_event(StopReason::StopString));
  EXPECT_EQ(stopped.response()["choices"][0]["finish_reason"], "stop");
  EXPECT_TRUE(stopped.response()["choices"][0]["logprobs"].is_null());
}

TEST(OpenAiApi, ChatStreamsAreServerSentEventsEndingInDone) {
  const ApiRequest request = parse(
      ApiKind::Chat, R"({"messages": [{"role": "user", "content": "x"}], "stream": true, "logprobs": true,
                               "top_logprobs": 1, "stream_options": {"include_usage": true}})");
  ResponseFormatter formatter(request, api_tokenizer(), "chatcmpl-1", 5);
  std::string stream = formatter.stream_prelude();
  stream += formatter.stream_event(token_event(72, "H"));
  stream += formatter.stream_event(token_event(105, ""));  // a partial character: logprobs only
  stream += formatter.stream_event(done_event(StopReason::Eos, "i"));
  EXPECT_EQ(formatter.stream_event(token_event(1, "late")), "");  // nothing after the end
  bool done = false;
  const std::vector<json> chunks = sse_objects(stream, done);
  EXPECT_TRUE(done);
  ASSERT_EQ(chunks.size(), 5u);
  for (const json& chunk : chunks) {
    EXPECT_EQ(chunk["object"], "chat.completion.chunk");
    EXPECT_EQ(chunk["id"], "chatcmpl-1");
  }
  EXPECT_EQ(chunks[0]["choices"][0]["delta"]["role"], "assistant");
  EXPECT_EQ(chunks[1]["choices"][0]["delta"]["content"], "H");
  EXPECT_EQ(chunks[1]["choices"][0]["logprobs"]["content"][0]["top_logprobs"].size(), 1u);
  EXPECT_TRUE(chunks[1]["choices"][0]["finish_reason"].is_null());
  EXPECT_FALSE(chunks[2]["choices"][0]["delta"].contains("content"));
  EXPECT_EQ(chunks[3]["choices"][0]["delta"]["content"], "i");
  EXPECT_EQ(chunks[3]["choices"][0]["finish_reason"], "stop");
  EXPECT_EQ(chunks[3]["usage"]["total_tokens"], 8);
  EXPECT_TRUE(chunks[4]["choices"].empty());
  EXPECT_EQ(chunks[4]["usage"]["prompt_tokens_details"]["cached_tokens"], 2);
}

TEST(OpenAiApi, CompletionStreamsSkipEmptyPiecesWithoutLogprobs) {
  ResponseFormatter formatter(parse(ApiKind::Completion, R"({"prompt": "x", "stream": true})"),
                              api_tokenizer(), "c", 0);
  EXPECT_EQ(formatter.stream_prelude(), "");
  EXPECT_EQ(formatter.stream_event(token_event(3, "")), "");
  std::string stream = formatter.stream_event(token_event(72, "H"));
  stream += formatter.stream_event(done_event(StopReason::MaxTokens));
  bool done = false;
  const std::vector<json> chunks = sse_objects(stream, done);
  EXPECT_TRUE(done);
  ASSERT_EQ(chunks.size(), 2u);
  EXPECT_EQ(chunks[0]["choices"][0]["text"], "H");
  EXPECT_EQ(chunks[1]["choices"][0]["text"], "");
  EXPECT_EQ(chunks[1]["choices"][0]["finish_reason"], "length");
}

TEST(OpenAiApi, AnErrorEventEndsTheStreamOrFailsTheResponse) {
  ServeEvent error;
  error.kind = ServeEvent::Kind::Error;
  error.error = "the model failed";
  ResponseFormatter streaming(parse(ApiKind::Chat, R"({"messages": [{"role": "user", "content": "x"}]})"),
                              api_tokenizer(), "c", 0);
  bool done = false;
  const std::vector<json> chunks = sse_objects(streaming.stream_event(error), done);
  EXPECT_TRUE(done);
  ASSERT_EQ(chunks.size(), 1u);
  EXPECT_EQ(chunks[0]["error"]["message"], "the model failed");
  ResponseFormatter plain(parse(ApiKind::Completion, R"({"prompt": "x"})"), api_tokenizer(), "c", 0);
  plain.collect(token_event(72, "H"));
  plain.collect(error);
  EXPECT_TRUE(plain.finished());
  try {
    plain.response();
    FAIL() << "an errored request produced a response";
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status, 500);
  }
}

TEST(OpenAiApi, ErrorBodiesHaveOpenAisShape) {
  const json e = json::parse(error_json("bad \xff value", "invalid_request_error", "x"));
  EXPECT_EQ(e["error"]["type"], "invalid_request_error");
  EXPECT_EQ(e["error"]["code"], "x");
  EXPECT_NE(e["error"]["message"].get<std::string>().find("bad"), std::string::npos);
  EXPECT_TRUE(json::parse(error_json("m", "server_error"))["error"]["code"].is_null());
  EXPECT_STREQ(error_type_for_status(401), "authentication_error");
  EXPECT_STREQ(error_type_for_status(413), "invalid_request_error");
  EXPECT_STREQ(error_type_for_status(500), "server_error");
}

TEST(OpenAiApi, TokenizeAndDetokenizeRoundTrip) {
  const json tokens = tokenize_response(json::parse(R"({"content": "Hello world"})"), api_tokenizer());
  EXPECT_EQ(tokens["tokens"].get<std::vector<int32_t>>(), api_tokenizer().encode("Hello world"));
  EXPECT_EQ(detokenize_response(json{{"tokens", tokens["tokens"]}}, api_tokenizer())["content"],
            "Hello world");
  EXPECT_THROW(tokenize_response(json::parse(R"({"content": 5})"), api_tokenizer()), ApiError);
  EXPECT_THROW(tokenize_response(json::parse(R"({})"), api_tokenizer()), ApiError);
  EXPECT_THROW(detokenize_response(json::parse(R"({"tokens": [1, 100000]})"), api_tokenizer()), ApiError);
  EXPECT_THROW(detokenize_response(json::parse(R"({"tokens": "1,2"})"), api_tokenizer()), ApiError);
}

TEST(OpenAiApi, MetricsAreInPrometheusTextFormat) {
  SchedulerMetrics m;
  m.requests_submitted = 7;
  m.prompt_tokens = 100;
  m.cached_prompt_tokens = 40;
  m.generated_tokens = 55;
  m.waiting = 3;
  m.steps = 9;
  m.step_seconds_quantiles = {0.01, 0.02, 0.04};
  m.step_seconds_sum = 0.2;
  HttpCounters counters;
  counters.queue_full = 2;
  const std::string text = prometheus_metrics(m, counters);
  for (const std::string& line : std::vector<std::string>{
           "mambacpp_requests_submitted_total 7\n", "mambacpp_prompt_tokens_total 100\n",
           "mambacpp_prompt_tokens_cached_total 40\n", "mambacpp_generated_tokens_total 55\n",
           "mambacpp_queue_depth 3\n", "mambacpp_http_queue_full_total 2\n",
           "mambacpp_step_seconds{quantile=\"0.99\"} 0.04\n", "mambacpp_step_seconds_count 9\n",
           "# TYPE mambacpp_step_seconds summary\n"})
    EXPECT_NE(text.find(line), std::string::npos) << line << "\n" << text;
  EXPECT_EQ(models_response("tiny", 3, 128)["data"][0]["id"], "tiny");
}

}  // namespace
}  // namespace mb::server

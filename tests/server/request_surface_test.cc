// SPDX-License-Identifier: MIT
// The request fields of server/request_surface.h through parse_api_request and resolve_prompt:
// logit_bias in both forms, the penalties, n, max_completion_tokens, stream_options, seed,
// top_logprobs, and the OpenAI fields refused by name or ignored; and ChoicesFormatter's responses
// and streams for n > 1.
#include "server/request_surface.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <limits>

#include "common/test_util.h"

namespace mb::server {
namespace {

using nlohmann::json;

const Tokenizer& surface_tokenizer() {
  static const Tokenizer t = [] {
    const std::string path = test::make_temp_dir("request_surface") + "/tokenizer.json";
    write_byte_level_tokenizer_json(path, 400);
    return Tokenizer::from_json_file(path);
  }();
  return t;
}

ApiRequest surface_parse(ApiKind kind, const std::string& body, const ApiDefaults& defaults = {}) {
  ApiRequest request = parse_api_request(kind, body, defaults, 77);
  resolve_prompt(request, surface_tokenizer(), ServedChatTemplate{}, defaults);
  return request;
}

// The message of the 400 `body` provokes; a failure when it is accepted or gets another status.
std::string surface_refusal(ApiKind kind, const std::string& body, const ApiDefaults& defaults = {}) {
  try {
    surface_parse(kind, body, defaults);
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status, 400) << body;
    return e.what();
  }
  ADD_FAILURE() << "accepted: " << body;
  return "";
}

void expect_surface_400(ApiKind kind, const std::string& body, const std::string& fragment) {
  const std::string message = surface_refusal(kind, body);
  EXPECT_NE(message.find(fragment), std::string::npos) << body << " -> " << message;
}

const std::string kUser = R"("messages": [{"role": "user", "content": "hi"}])";

TEST(RequestSurface, LogitBiasTakesOpenAisObjectAndLlamaServersListWithFalseAsABan) {
  const ApiRequest object = surface_parse(
      ApiKind::Completion, R"({"prompt": "hi", "logit_bias": {"5": 2.5, "300": -100, "7": 0}})");
  std::vector<std::pair<int32_t, float>> bias = object.serve.sampling.logit_bias;
  std::sort(bias.begin(), bias.end());
  EXPECT_EQ(bias, (std::vector<std::pair<int32_t, float>>{{5, 2.5f}, {7, 0.0f}, {300, -100.0f}}));

  const ApiRequest list =
      surface_parse(ApiKind::Chat, "{" + kUser + R"(, "logit_bias": [[9, 1.5], [10, false]]})");
  ASSERT_EQ(list.serve.sampling.logit_bias.size(), 2u);
  EXPECT_EQ(list.serve.sampling.logit_bias[0], (std::pair<int32_t, float>{9, 1.5f}));
  EXPECT_EQ(list.serve.sampling.logit_bias[1].second, -std::numeric_limits<float>::infinity());
  EXPECT_TRUE(surface_parse(ApiKind::Completion, R"({"prompt": "hi", "logit_bias": {}})")
                  .serve.sampling.logit_bias.empty());

  const ApiKind c = ApiKind::Completion;
  expect_surface_400(c, R"({"prompt": "hi", "logit_bias": {"abc": 1}})", "logit_bias keys must be token ids");
  expect_surface_400(c, R"({"prompt": "hi", "logit_bias": {"-3": 1}})", "logit_bias keys must be token ids");
  expect_surface_400(c, R"({"prompt": "hi", "logit_bias": {"5": 100.5}})",
                     "logit_bias[\"5\"] must be in [-100, 100]");
  expect_surface_400(c, R"({"prompt": "hi", "logit_bias": {"5": true}})",
                     "logit_bias[\"5\"] must be a number");
  expect_surface_400(c, R"({"prompt": "hi", "logit_bias": {"5": "1"}})",
                     "logit_bias[\"5\"] must be a number");
  expect_surface_400(c, R"({"prompt": "hi", "logit_bias": [[5]]})",
                     "logit_bias[0] must be an [id, bias] pair");
  expect_surface_400(c, R"({"prompt": "hi", "logit_bias": [[5, 1], [5, 2]]})", "token 5 twice");
  expect_surface_400(c, R"({"prompt": "hi", "logit_bias": 5})", "logit_bias must be an object");
  // The id is checked against the vocabulary (the tokenizer's 400 here) and named.
  expect_surface_400(c, R"({"prompt": "hi", "logit_bias": {"400": 1}})",
                     "logit_bias token 400 is outside the vocabulary [0, 400)");
  ApiDefaults small;
  small.vocab_size = 300;
  const std::string message = surface_refusal(c, R"({"prompt": "hi", "logit_bias": [[350, 1]]})", small);
  EXPECT_NE(message.find("logit_bias token 350 is outside the vocabulary [0, 300)"), std::string::npos)
      << message;
}

TEST(RequestSurface, PenaltiesAreReadAndBounded) {
  const ApiRequest r =
      surface_parse(ApiKind::Chat, "{" + kUser + R"(, "presence_penalty": 0.5, "frequency_penalty": -1.25})");
  EXPECT_EQ(r.serve.sampling.presence_penalty, 0.5f);
  EXPECT_EQ(r.serve.sampling.frequency_penalty, -1.25f);
  const ApiKind c = ApiKind::Completion;
  expect_surface_400(c, R"({"prompt": "hi", "presence_penalty": 2.01})",
                     "presence_penalty must be in [-2, 2]");
  expect_surface_400(c, R"({"prompt": "hi", "frequency_penalty": -3})",
                     "frequency_penalty must be in [-2, 2]");
  expect_surface_400(c, R"({"prompt": "hi", "frequency_penalty": "1"})",
                     "frequency_penalty must be a number");
}

TEST(RequestSurface, NMaxCompletionTokensSeedTopLogprobsAndStreamOptions) {
  const ApiKind c = ApiKind::Completion, chat = ApiKind::Chat;
  EXPECT_EQ(surface_parse(c, R"({"prompt": "hi", "n": 16})").serve.n, 16);
  EXPECT_EQ(surface_parse(c, R"({"prompt": "hi"})").serve.n, 1);
  expect_surface_400(c, R"({"prompt": "hi", "n": 0})", "n must be in [1, 16], got 0");
  expect_surface_400(c, R"({"prompt": "hi", "n": 2.5})", "n must be an integer");

  EXPECT_EQ(surface_parse(chat, "{" + kUser + R"(, "max_completion_tokens": 11})").serve.max_tokens, 11);
  EXPECT_EQ(surface_parse(chat, "{" + kUser + R"(, "max_completion_tokens": 11, "max_tokens": 11})")
                .serve.max_tokens,
            11);
  expect_surface_400(chat, "{" + kUser + R"(, "max_completion_tokens": 11, "max_tokens": 12})",
                     "max_tokens (12) and max_completion_tokens (11) differ");
  expect_surface_400(chat, "{" + kUser + R"(, "max_completion_tokens": -1})",
                     "max_completion_tokens must be in");

  // seed is per request; absent (or -1) it is the server's draw.
  EXPECT_EQ(surface_parse(chat, "{" + kUser + R"(, "seed": 42})").serve.sampling.seed, 42u);
  EXPECT_EQ(surface_parse(chat, "{" + kUser + "}").serve.sampling.seed, 77u);

  const ApiRequest twenty = surface_parse(chat, "{" + kUser + R"(, "logprobs": true, "top_logprobs": 20})");
  EXPECT_EQ(twenty.serve.n_probs, 20);
  expect_surface_400(chat, "{" + kUser + R"(, "logprobs": true, "top_logprobs": 21})",
                     "top_logprobs must be in [0, 20], got 21");

  EXPECT_TRUE(
      surface_parse(chat, "{" + kUser + R"(, "stream": true, "stream_options": {"include_usage": true}})")
          .include_usage);
  EXPECT_FALSE(surface_parse(chat, "{" + kUser + R"(, "stream_options": {"continuous_usage_stats": false}})")
                   .include_usage);
  expect_surface_400(chat, "{" + kUser + R"(, "stream_options": {"continuous_usage_stats": true}})",
                     "stream_options.continuous_usage_stats is not supported");
  expect_surface_400(chat, "{" + kUser + R"(, "stream_options": {"include_usage": 1}})",
                     "stream_options.include_usage must be true or false");
}

TEST(RequestSurface, FieldsThatChangeTheAnswerAreRefusedByNameAndTheOthersIgnored) {
  const ApiKind c = ApiKind::Completion, chat = ApiKind::Chat;
  expect_surface_400(c, R"({"prompt": "hi", "suffix": "end"})", "suffix is not supported");
  expect_surface_400(c, R"({"prompt": "hi", "best_of": 2})", "best_of must be 1");
  expect_surface_400(c, R"({"prompt": "hi", "echo": true})", "echo is not supported");
  expect_surface_400(chat, "{" + kUser + R"(, "audio": {"voice": "alloy", "format": "wav"}})",
                     "audio is not supported");
  expect_surface_400(chat, "{" + kUser + R"(, "modalities": ["text", "audio"]})",
                     "modalities may hold only \"text\"");
  expect_surface_400(chat, "{" + kUser + R"(, "web_search_options": {}})",
                     "web_search_options is not supported");
  expect_surface_400(chat, "{" + kUser + R"(, "functions": [{"name": "f"}]})", "functions is not supported");
  expect_surface_400(chat, "{" + kUser + R"(, "function_call": "auto"})", "function_call is not supported");
  expect_surface_400(chat, "{" + kUser + R"(, "verbosity": "low"})", "verbosity is not supported");
  // These change nothing in the answer: accepted and ignored (README, "Request fields").
  const ApiRequest ignored =
      surface_parse(chat, "{" + kUser +
                              R"(, "user": "u", "metadata": {"k": "v"}, "store": true, "service_tier": "auto",
                   "prediction": {"type": "content", "content": "x"}, "prompt_cache_key": "k",
                   "safety_identifier": "s", "modalities": ["text"], "verbosity": "medium",
                   "suffix": "", "best_of": 1, "echo": false})");
  EXPECT_EQ(ignored.serve.n, 1);
  EXPECT_TRUE(surface_parse(c, R"({"prompt": "hi", "user": "u", "suffix": null})").prompt_text.has_value());
}

ServeEvent surface_token(int choice, int32_t id, const std::string& text) {
  ServeEvent e;
  e.kind = ServeEvent::Kind::Token;
  e.choice = choice;
  e.token = id;
  e.text = text;
  e.logprob = -0.25f;
  return e;
}

ServeEvent surface_done(int choice, int64_t completion_tokens) {
  ServeEvent e;
  e.kind = ServeEvent::Kind::Done;
  e.choice = choice;
  e.stop_reason = choice == 0 ? StopReason::MaxTokens : StopReason::Eos;
  e.prompt_tokens = 6;
  e.cached_tokens = 2;
  e.completion_tokens = completion_tokens;
  return e;
}

TEST(RequestSurface, ChoicesGetTheirIndexAndTheUsageCountsThePromptOnce) {
  const ApiRequest request = surface_parse(ApiKind::Chat, "{" + kUser + R"(, "n": 2, "logprobs": true})");
  ChoicesFormatter formatter(request, surface_tokenizer(), "chatcmpl-x", 9);
  const std::vector<ServeEvent> events = {surface_token(0, 72, "H"), surface_token(1, 73, "I"),
                                          surface_token(0, 74, "J"), surface_done(1, 1), surface_done(0, 2)};
  for (size_t i = 0; i < events.size(); ++i) {
    EXPECT_FALSE(formatter.finished()) << i;
    formatter.collect(events[i]);
  }
  EXPECT_TRUE(formatter.finished());
  const json response = formatter.response();
  ASSERT_EQ(response["choices"].size(), 2u);
  EXPECT_EQ(response["choices"][0]["index"], 0);
  EXPECT_EQ(response["choices"][0]["message"]["content"], "HJ");
  EXPECT_EQ(response["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(response["choices"][0]["logprobs"]["content"].size(), 2u);
  EXPECT_EQ(response["choices"][1]["index"], 1);
  EXPECT_EQ(response["choices"][1]["message"]["content"], "I");
  EXPECT_EQ(response["choices"][1]["finish_reason"], "stop");
  EXPECT_EQ(response["usage"]["prompt_tokens"], 6);
  EXPECT_EQ(response["usage"]["completion_tokens"], 3);
  EXPECT_EQ(response["usage"]["total_tokens"], 9);
  EXPECT_EQ(response["usage"]["prompt_tokens_details"]["cached_tokens"], 2);
  EXPECT_EQ(response["id"], "chatcmpl-x");

  // An error of any choice is the request's error.
  ChoicesFormatter failing(request, surface_tokenizer(), "chatcmpl-y", 9);
  failing.collect(surface_token(0, 72, "H"));
  ServeEvent error;
  error.kind = ServeEvent::Kind::Error;
  error.choice = 1;
  error.error = "forward pass failed: boom";
  failing.collect(error);
  EXPECT_TRUE(failing.finished());
  EXPECT_THROW(failing.response(), ApiError);
}

TEST(RequestSurface, StreamedChoicesCarryTheirIndexAndEndOnceWithOneUsage) {
  const ApiRequest request =
      surface_parse(ApiKind::Completion,
                    R"({"prompt": "hi", "n": 2, "stream": true, "stream_options": {"include_usage": true}})");
  ChoicesFormatter formatter(request, surface_tokenizer(), "cmpl-x", 9);
  EXPECT_EQ(formatter.stream_prelude(), "");
  std::string stream;
  for (const ServeEvent& e : {surface_token(1, 73, "I"), surface_token(0, 72, "H"), surface_done(0, 1)}) {
    stream += formatter.stream_event(e);
    EXPECT_EQ(stream.find("[DONE]"), std::string::npos);
    EXPECT_EQ(stream.find("usage"), std::string::npos);
  }
  stream += formatter.stream_event(surface_done(1, 1));
  EXPECT_TRUE(formatter.finished());
  std::vector<json> chunks;
  size_t at = 0, dones = 0;
  while ((at = stream.find("data: ", at)) != std::string::npos) {
    const size_t end = stream.find("\n\n", at);
    const std::string data = stream.substr(at + 6, end - at - 6);
    at = end;
    if (data == "[DONE]")
      ++dones;
    else
      chunks.push_back(json::parse(data));
  }
  EXPECT_EQ(dones, 1u);
  ASSERT_EQ(chunks.size(), 5u);  // two tokens, two final chunks, the usage chunk
  EXPECT_EQ(chunks[0]["choices"][0]["index"], 1);
  EXPECT_EQ(chunks[0]["choices"][0]["text"], "I");
  EXPECT_EQ(chunks[1]["choices"][0]["index"], 0);
  EXPECT_EQ(chunks[2]["choices"][0]["index"], 0);
  EXPECT_EQ(chunks[2]["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(chunks[3]["choices"][0]["index"], 1);
  EXPECT_EQ(chunks[3]["choices"][0]["finish_reason"], "stop");
  EXPECT_EQ(chunks[3]["usage"]["completion_tokens"], 2);
  EXPECT_TRUE(chunks[4]["choices"].empty());
  EXPECT_EQ(chunks[4]["usage"]["prompt_tokens"], 6);
  EXPECT_EQ(chunks[4]["usage"]["total_tokens"], 8);

  // A chat stream opens with one role chunk per choice.
  const ApiRequest chat = surface_parse(ApiKind::Chat, "{" + kUser + R"(, "n": 3, "stream": true})");
  const std::vector<json> preludes = ChoicesFormatter(chat, surface_tokenizer(), "c", 0).prelude_chunks();
  ASSERT_EQ(preludes.size(), 3u);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(preludes[i]["choices"][0]["index"], i);
}

TEST(RequestSurface, OneChoiceFormatsExactlyAsTheSingleFormatter) {
  const ApiRequest request = surface_parse(
      ApiKind::Chat,
      "{" + kUser + R"(, "stream": true, "logprobs": true, "stream_options": {"include_usage": true}})");
  ChoicesFormatter choices(request, surface_tokenizer(), "id", 3);
  ResponseFormatter single(request, surface_tokenizer(), "id", 3);
  EXPECT_EQ(choices.stream_prelude(), single.stream_prelude());
  for (const ServeEvent& e : {surface_token(0, 72, "H"), surface_done(0, 1)})
    EXPECT_EQ(choices.stream_event(e), single.stream_event(e));
  EXPECT_TRUE(choices.finished());
}

}  // namespace
}  // namespace mb::server

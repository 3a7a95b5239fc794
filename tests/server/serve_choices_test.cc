// SPDX-License-Identifier: MIT
// `mambacpp serve` with n > 1 choices, logit_bias and the penalties, end to end over loopback:
// choice i of a request equals the request with n = 1 and seed + i, plain and streamed; the
// metrics count the prompt once; a ban by logit_bias is honoured.
#include <gtest/gtest.h>
#include <httplib.h>

#include <nlohmann/json.hpp>
#include <sstream>

#include "common/test_util.h"
#include "server_process.h"

namespace mb {
namespace {

using nlohmann::json;

json choices_post(const test::ServerProcess& server, const json& body) {
  httplib::Client client("127.0.0.1", server.port());
  client.set_read_timeout(120, 0);
  const auto res = client.Post("/v1/completions", body.dump(), "application/json");
  EXPECT_TRUE(res);
  if (!res) return json();
  EXPECT_EQ(res->status, 200) << body.dump() << " -> " << res->body;
  return json::parse(res->body, nullptr, false);
}

// The chunks of a streamed completion, and whether [DONE] closed it (once, at the end).
std::vector<json> choices_stream(const test::ServerProcess& server, json body, bool& done) {
  body["stream"] = true;
  httplib::Client client("127.0.0.1", server.port());
  client.set_read_timeout(120, 0);
  httplib::Request req;
  req.method = "POST";
  req.path = "/v1/completions";
  req.body = body.dump();
  req.set_header("Content-Type", "application/json");
  std::string received;
  req.content_receiver = [&](const char* data, size_t length, uint64_t, uint64_t) {
    received.append(data, length);
    return true;
  };
  EXPECT_TRUE(client.send(req));
  std::vector<json> chunks;
  done = false;
  std::istringstream lines(received);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("data: ", 0) != 0) continue;
    EXPECT_FALSE(done) << "data after [DONE]";
    if (line == "data: [DONE]")
      done = true;
    else
      chunks.push_back(json::parse(line.substr(6)));
  }
  return chunks;
}

uint64_t choices_metric(const test::ServerProcess& server, const std::string& name) {
  httplib::Client client("127.0.0.1", server.port());
  const auto res = client.Get("/metrics");
  EXPECT_TRUE(res);
  if (!res) return 0;
  std::istringstream lines(res->body);
  for (std::string line; std::getline(lines, line);)
    if (line.rfind(name + " ", 0) == 0) return std::stoull(line.substr(name.size() + 1));
  ADD_FAILURE() << "no metric " << name;
  return 0;
}

TEST(ServeChoices, ChoiceIEqualsTheSoloRequestWithSeedPlusIPlainAndStreamed) {
  test::ServerProcess server(test::server_test_model(), "-t 1 --cache-mb 0");
  ASSERT_GT(server.port(), 0);
  const json base = {{"prompt", {5, 6, 7, 8, 9}},
                     {"max_tokens", 6},
                     {"temperature", 1.0},
                     {"top_k", 0},
                     {"min_p", 0},
                     {"ignore_eos", true},
                     {"logprobs", 2},
                     {"presence_penalty", 0.4},
                     {"frequency_penalty", 0.2}};
  json together = base;
  together["n"] = 3;
  together["seed"] = 40;
  const json response = choices_post(server, together);
  ASSERT_EQ(response["choices"].size(), 3u) << response.dump();
  // The prompt was prefilled once: 5 prompt tokens counted for this request of 3 choices.
  EXPECT_EQ(choices_metric(server, "mambacpp_prompt_tokens_total"), 5u);
  EXPECT_EQ(response["usage"]["prompt_tokens"], 5);
  EXPECT_EQ(response["usage"]["completion_tokens"], 18);
  EXPECT_EQ(response["usage"]["total_tokens"], 23);

  bool done = false;
  const std::vector<json> chunks = choices_stream(server, together, done);
  EXPECT_TRUE(done);
  std::vector<std::string> streamed(3);
  for (const json& chunk : chunks)
    for (const json& choice : chunk["choices"]) streamed.at(choice["index"].get<size_t>()) += choice["text"];

  for (int i = 0; i < 3; ++i) {
    json alone = base;
    alone["seed"] = 40 + i;
    const json solo = choices_post(server, alone);
    const json& choice = response["choices"][i];
    EXPECT_EQ(choice["index"], i);
    EXPECT_EQ(choice["text"], solo["choices"][0]["text"]) << i;
    // Bit for bit: JSON prints each float so that it parses back to the same value.
    EXPECT_EQ(choice["logprobs"]["token_logprobs"], solo["choices"][0]["logprobs"]["token_logprobs"]) << i;
    EXPECT_EQ(choice["logprobs"]["tokens"], solo["choices"][0]["logprobs"]["tokens"]) << i;
    EXPECT_EQ(streamed[i], solo["choices"][0]["text"]) << i;
  }
}

TEST(ServeChoices, ALogitBiasIsHonouredAndABadIdIsA400NamingIt) {
  test::ServerProcess server(test::server_test_model(), "-t 1");
  ASSERT_GT(server.port(), 0);
  httplib::Client client("127.0.0.1", server.port());
  const auto ids = client.Post("/tokenize", R"({"content": "A"})", "application/json");
  ASSERT_TRUE(ids);
  const json tokens = json::parse(ids->body)["tokens"];
  ASSERT_EQ(tokens.size(), 1u) << ids->body;
  const std::string a = std::to_string(tokens[0].get<int>());
  // +100 outweighs anything a random model's logits hold; a ban keeps it out even then.
  const json biased = {{"prompt", {5, 6, 7}}, {"max_tokens", 3},    {"temperature", 0.7},
                       {"seed", 3},           {"ignore_eos", true}, {"logit_bias", {{a, 100}}}};
  EXPECT_EQ(choices_post(server, biased)["choices"][0]["text"], "AAA");
  json banned = biased;
  banned["logit_bias"] =
      json::array({json::array({tokens[0], 100}), json::array({tokens[0].get<int>() + 1, false})});
  EXPECT_EQ(choices_post(server, banned)["choices"][0]["text"], "AAA");
  // A ban: the token never comes out (its text, "A", is that id's alone).
  banned["logit_bias"] = {{a, false}};
  banned["logprobs"] = 0;
  banned["max_tokens"] = 8;
  const json tokens_out = choices_post(server, banned)["choices"][0]["logprobs"]["tokens"];
  ASSERT_EQ(tokens_out.size(), 8u);
  for (const json& token : tokens_out) EXPECT_NE(token, "A");

  json bad = biased;
  bad["logit_bias"] = {{"99999999", 1}};
  const auto res = client.Post("/v1/completions", bad.dump(), "application/json");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 400);
  EXPECT_NE(res->body.find("logit_bias token 99999999 is outside the vocabulary"), std::string::npos)
      << res->body;
}

}  // namespace
}  // namespace mb

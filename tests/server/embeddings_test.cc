// SPDX-License-Identifier: MIT
// /v1/embeddings: the request parser (every input shape, the fields, the refusals and limits),
// base64 that decodes to the float vectors, and the endpoint end to end on `mambacpp serve`,
// whose vectors equal embed_batch's bit for bit in both encodings.
#include <gtest/gtest.h>
#include <httplib.h>

#include <bit>
#include <cstring>
#include <nlohmann/json.hpp>

#include "common/test_util.h"
#include "core/error.h"
#include "engine/embed.h"
#include "model/model.h"
#include "server/embeddings_api.h"
#include "server/openai_api.h"
#include "server_process.h"
#include "tokenizer/tokenizer.h"

namespace mb {
namespace embeddings_test {

using nlohmann::json;
using server::EmbeddingsLimits;
using server::EmbeddingsModel;
using server::EmbeddingsRequest;

// The byte-level tokenizer of the served test model.
const Tokenizer& embeddings_tokenizer() {
  static const Tokenizer tokenizer = Tokenizer::from_model_dir(test::server_test_model());
  return tokenizer;
}

EmbeddingsModel parser_model() {
  return EmbeddingsModel{&embeddings_tokenizer(), 301, 32};
}

EmbeddingsRequest parse_embeddings(const json& body, EmbeddingsLimits limits = {}) {
  return server::parse_embeddings_request(body.dump(), parser_model(), limits, "served");
}

void expect_embeddings_refusal(const json& body, const std::string& words, EmbeddingsLimits limits = {}) {
  try {
    parse_embeddings(body, limits);
    ADD_FAILURE() << body.dump() << " was accepted; expected '" << words << "'";
  } catch (const server::ApiError& e) {
    EXPECT_EQ(e.status, 400);
    EXPECT_NE(std::string(e.what()).find(words), std::string::npos) << e.what();
  }
}

std::vector<float> decode_base64_floats(const std::string& text) {
  std::vector<uint8_t> bytes;
  uint32_t group = 0;
  int bits = 0;
  for (char c : text) {
    if (c == '=') break;
    const char* alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    group = (group << 6) | static_cast<uint32_t>(std::strchr(alphabet, c) - alphabet);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      bytes.push_back(static_cast<uint8_t>(group >> bits));
    }
  }
  std::vector<float> values(bytes.size() / 4);
  for (size_t i = 0; i < values.size(); ++i) {
    uint32_t v = 0;
    for (int b = 3; b >= 0; --b) v = (v << 8) | bytes[i * 4 + b];  // little-endian
    values[i] = std::bit_cast<float>(v);
  }
  return values;
}

std::vector<float> json_floats(const json& vector) {
  std::vector<float> values;
  for (const json& v : vector) values.push_back(static_cast<float>(v.get<double>()));
  return values;
}

bool same_float_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

TEST(EmbeddingsApi, EveryInputShape) {
  const Tokenizer& tok = embeddings_tokenizer();
  const auto one = parse_embeddings({{"input", "hello"}});
  EXPECT_EQ(one.inputs, (std::vector<std::vector<int32_t>>{tok.encode("hello")}));
  EXPECT_EQ(one.prompt_tokens, static_cast<int64_t>(tok.encode("hello").size()));
  EXPECT_EQ(one.model, "served");
  EXPECT_FALSE(one.base64);

  const auto texts =
      parse_embeddings({{"input", {"a b", "cd"}}, {"model", "m"}, {"encoding_format", "base64"}});
  EXPECT_EQ(texts.inputs, (std::vector<std::vector<int32_t>>{tok.encode("a b"), tok.encode("cd")}));
  EXPECT_EQ(texts.model, "m");
  EXPECT_TRUE(texts.base64);

  const auto ids = parse_embeddings({{"input", {5, 6, 300}}, {"dimensions", 32}, {"user", "u"}});
  EXPECT_EQ(ids.inputs, (std::vector<std::vector<int32_t>>{{5, 6, 300}}));
  EXPECT_EQ(ids.prompt_tokens, 3);

  const auto lists = parse_embeddings({{"input", {{1, 2}, {3}}}, {"encoding_format", "float"}});
  EXPECT_EQ(lists.inputs, (std::vector<std::vector<int32_t>>{{1, 2}, {3}}));
  EXPECT_EQ(lists.prompt_tokens, 3);
}

TEST(EmbeddingsApi, RefusesWhatOpenAiRefuses) {
  expect_embeddings_refusal({{"model", "m"}}, "'input' is required");
  expect_embeddings_refusal({{"input", ""}}, "input[0] is an empty string");
  expect_embeddings_refusal({{"input", {"a", ""}}}, "input[1] is an empty string");
  expect_embeddings_refusal({{"input", json::array()}}, "'input' is an empty list");
  expect_embeddings_refusal({{"input", {{1}, json::array()}}}, "input[1] is empty");
  expect_embeddings_refusal({{"input", {"a", {1}}}}, "input[1] is array");
  expect_embeddings_refusal({{"input", {1, "a"}}}, "only integer token ids");
  expect_embeddings_refusal({{"input", {1.5}}}, "only integer token ids");
  expect_embeddings_refusal({{"input", 7}}, "'input' must be a string");
  expect_embeddings_refusal({{"input", {301}}}, "token id 301 is outside the vocabulary [0, 301)");
  expect_embeddings_refusal({{"input", {{0}, {-1}}}}, "input[1]: token id -1");
  expect_embeddings_refusal({{"input", "a"}, {"encoding_format", "int8"}}, "'encoding_format' must be");
  expect_embeddings_refusal({{"input", "a"}, {"dimensions", 16}},
                            "'dimensions' must equal the model's embedding width, 32");
  expect_embeddings_refusal({{"input", "a"}, {"model", 3}}, "'model' must be a string");
  expect_embeddings_refusal("[1]"_json, "");
}

TEST(EmbeddingsApi, LimitsAreNamed) {
  EmbeddingsLimits limits;
  limits.max_inputs = 2;
  expect_embeddings_refusal({{"input", {"a", "b", "c"}}}, "more than the limit of 2 per request", limits);
  limits = {};
  limits.max_total_tokens = 4;
  expect_embeddings_refusal({{"input", {{1, 2}, {3, 4, 5}}}}, "more than 4 tokens in all", limits);
  EXPECT_NO_THROW(parse_embeddings({{"input", {{1, 2}, {3, 4}}}}, limits));
  limits = {};
  limits.max_input_tokens = 2;
  expect_embeddings_refusal({{"input", {{1}, {1, 2, 3}}}},
                            "input[1] has 3 tokens, more than the context limit of 2", limits);
}

TEST(EmbeddingsApi, Base64IsTheLittleEndianFloatBytes) {
  EXPECT_EQ(server::base64_floats({}), "");
  EXPECT_EQ(server::base64_floats({1.0f}), "AACAPw==");  // 00 00 80 3f
  const std::vector<float> values{0.1f, -2.5f, 3.0e-38f, 1.0f / 3.0f, -0.0f};
  EXPECT_TRUE(same_float_bits(decode_base64_floats(server::base64_floats(values)), values));

  EmbeddingsRequest request;
  request.model = "m";
  request.prompt_tokens = 7;
  const json floats = server::embeddings_response(request, {values, {1.0f}});
  EXPECT_EQ(floats["object"], "list");
  EXPECT_EQ(floats["model"], "m");
  EXPECT_EQ(floats["usage"], (json{{"prompt_tokens", 7}, {"total_tokens", 7}}));
  ASSERT_EQ(floats["data"].size(), 2u);
  EXPECT_EQ(floats["data"][1]["object"], "embedding");
  EXPECT_EQ(floats["data"][1]["index"], 1);
  // The text of the float form parses back to the same floats.
  EXPECT_TRUE(same_float_bits(json_floats(json::parse(floats.dump())["data"][0]["embedding"]), values));
  request.base64 = true;
  const json encoded = server::embeddings_response(request, {values});
  EXPECT_TRUE(same_float_bits(decode_base64_floats(encoded["data"][0]["embedding"]), values));
}

// The endpoint on a real server: each encoding, each input shape, every vector bit-identical to
// embed_batch's on the same checkpoint; --pooling last; refusals in OpenAI's error shape.
TEST(EmbeddingsServe, VectorsEqualTheEngineInEveryForm) {
  const auto model = Model::load(test::server_test_model());
  const Tokenizer& tok = embeddings_tokenizer();
  const std::vector<std::string> texts{"hello world", "a", "embeddings are pooled hidden states"};
  std::vector<std::vector<int32_t>> ids;
  for (const auto& t : texts) ids.push_back(tok.encode(t));
  Workspace ws;
  const ComputeContext ctx{1, best_isa()};
  for (Pooling pooling : {Pooling::Mean, Pooling::Last}) {
    EmbedOptions o;
    o.pooling = pooling;
    const auto want = embed_batch(*model, ctx, ids, o, ws);
    test::ServerProcess server(test::server_test_model(),
                               std::string("-t 1 -c 64 -b 8 --pooling ") + pooling_name(pooling));
    ASSERT_NE(server.port(), 0);
    httplib::Client client("127.0.0.1", server.port());
    client.set_read_timeout(120, 0);
    const auto post = [&](const json& body, int status = 200) {
      const auto res = client.Post("/v1/embeddings", body.dump(), "application/json");
      EXPECT_TRUE(res);
      if (!res) return json();
      EXPECT_EQ(res->status, status) << res->body;
      return json::parse(res->body, nullptr, false);
    };
    const json as_floats = post({{"input", texts}, {"model", "x"}});
    ASSERT_EQ(as_floats["data"].size(), texts.size()) << as_floats.dump();
    EXPECT_EQ(as_floats["model"], "x");
    int64_t tokens = 0;
    for (const auto& i : ids) tokens += static_cast<int64_t>(i.size());
    EXPECT_EQ(as_floats["usage"]["prompt_tokens"], tokens);
    const json as_base64 = post({{"input", texts}, {"encoding_format", "base64"}});
    const json as_lists = post({{"input", ids}});
    for (size_t i = 0; i < texts.size(); ++i) {
      EXPECT_EQ(as_floats["data"][i]["index"], i);
      EXPECT_TRUE(same_float_bits(json_floats(as_floats["data"][i]["embedding"]), want[i])) << i;
      EXPECT_TRUE(same_float_bits(decode_base64_floats(as_base64["data"][i]["embedding"]), want[i])) << i;
      EXPECT_TRUE(same_float_bits(json_floats(as_lists["data"][i]["embedding"]), want[i])) << i;
      const json alone = post({{"input", texts[i]}});
      EXPECT_TRUE(same_float_bits(json_floats(alone["data"][0]["embedding"]), want[i])) << i;
      const json alone_ids = post({{"input", ids[i]}});
      EXPECT_TRUE(same_float_bits(json_floats(alone_ids["data"][0]["embedding"]), want[i])) << i;
    }
    const json models = json::parse(client.Get("/v1/models")->body);
    EXPECT_EQ(models["data"][0]["meta"]["pooling"], pooling_name(pooling));
    EXPECT_EQ(models["data"][0]["meta"]["n_embd"], 32);
    // Refusals: an empty string, a width the model lacks, an input past -c.
    EXPECT_NE(post({{"input", {"a", ""}}}, 400)["error"]["message"].get<std::string>().find("input[1]"),
              std::string::npos);
    EXPECT_NE(
        post({{"input", "a"}, {"dimensions", 8}}, 400)["error"]["message"].get<std::string>().find("32"),
        std::string::npos);
    EXPECT_NE(post({{"input", std::string(100, 'x')}}, 400)["error"]["message"].get<std::string>().find("-c"),
              std::string::npos);
    EXPECT_EQ(server.terminate(), 0);
  }
}

TEST(EmbeddingsServe, RefusesAnUnknownPooling) {
  const auto exit = test::serve_until_exit(test::server_test_model(), "--pooling max", 60);
  EXPECT_NE(exit.status, 0);
  EXPECT_NE(exit.stderr_text.find("--pooling must be 'mean' or 'last'"), std::string::npos)
      << exit.stderr_text;
}

}  // namespace embeddings_test
}  // namespace mb

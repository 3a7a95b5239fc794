// SPDX-License-Identifier: MIT
// POST /v1/embeddings in OpenAI's shape, as pure functions (no socket): the body is parsed and
// checked into token sequences, and the embeddings are formatted as the response.
//
// `input` is a string, a list of strings, a list of token ids (one input) or a list of lists of
// ids; `encoding_format` "float" (default) or "base64" (each vector's little-endian float32
// bytes, base64-encoded, as OpenAI sends them); `dimensions` is accepted only when it equals the
// model's width (the vectors cannot be shortened without a model trained for it); `user` and
// unknown fields are ignored, as OpenAI does. Empty strings and empty id lists are refused (as
// OpenAI refuses them), and so are requests past the limits, with a 400 naming the limit.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/embed.h"
#include "tokenizer/tokenizer.h"

namespace mb::server {

struct EmbeddingsLimits {
  size_t max_inputs = 2048;          // OpenAI's limit on inputs per request
  int64_t max_total_tokens = 65536;  // all inputs together: bounds one request's forward work
  int64_t max_input_tokens = 0;      // per input (the server's -c); 0 = only the total bounds it
};

// What the endpoint needs to know about the served model.
struct EmbeddingsModel {
  const Tokenizer* tokenizer = nullptr;  // null: token-id inputs only
  int64_t vocab_size = 0;                // ids must lie below it
  int64_t d_model = 0;                   // the vectors' width
};

struct EmbeddingsRequest {
  std::vector<std::vector<int32_t>> inputs;  // one token sequence per input, in order
  bool base64 = false;
  std::string model;  // echoed back; the request's, else the server's model id
  int64_t prompt_tokens = 0;
};

// Parses and checks a body (parse_request_body's bounds apply first). Throws ApiError (400)
// naming the field and the problem.
EmbeddingsRequest parse_embeddings_request(std::string_view body, const EmbeddingsModel& model,
                                           const EmbeddingsLimits& limits, const std::string& model_id);

// {"object": "list", "data": [{"object": "embedding", "index", "embedding"}], "model",
// "usage": {"prompt_tokens", "total_tokens"}}, one entry per input in order.
nlohmann::json embeddings_response(const EmbeddingsRequest& request,
                                   const std::vector<std::vector<float>>& embeddings);

// Adds the embedding width and pooling to /v1/models' entry ("meta": {"n_embd", "pooling"}, as
// llama-server reports n_embd), when the server serves embeddings.
void add_embeddings_meta(nlohmann::json& models, const EmbeddingsModel& model, Pooling pooling);

// The bytes of `values` as little-endian float32, in standard base64 (with padding).
std::string base64_floats(const std::vector<float>& values);

}  // namespace mb::server

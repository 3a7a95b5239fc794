// SPDX-License-Identifier: MIT
// Fuzzes the /v1/embeddings request parser (server/embeddings_api.h): the fuzzer's bytes are the
// request body, parsed against a byte-level tokenizer under small limits (8 inputs, 64 tokens, 16
// per input) so that every input finishes quickly. Parsing must only ever refuse with mb::Error
// (ApiError); an accepted request must hold between 1 and 8 inputs, none empty, every id inside
// the vocabulary, with prompt_tokens their total, within the limits, and its response (both
// encodings) must serialize.
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz_support.h"
#include "server/embeddings_api.h"
#include "tokenizer/tokenizer.h"

namespace {

constexpr int64_t kVocab = 300;
constexpr int64_t kWidth = 4;

void fail(const char* what) {
  std::fprintf(stderr, "%s\n", what);
  std::abort();
}

const mb::Tokenizer& fuzz_tokenizer() {
  static const mb::Tokenizer tokenizer = [] {
    const std::string path = mb::fuzz::scratch_dir() + "/byte_level.json";
    mb::write_byte_level_tokenizer_json(path, kVocab);
    return mb::Tokenizer::from_json_file(path);
  }();
  return tokenizer;
}

void check_accepted(const mb::server::EmbeddingsRequest& request,
                    const mb::server::EmbeddingsLimits& limits) {
  if (request.inputs.empty() || request.inputs.size() > limits.max_inputs)
    fail("accepted a bad number of inputs");
  int64_t total = 0;
  for (const auto& input : request.inputs) {
    if (input.empty()) fail("accepted an empty input");
    if (static_cast<int64_t>(input.size()) > limits.max_input_tokens)
      fail("accepted an input past the limit");
    for (int32_t id : input)
      if (id < 0 || id >= kVocab) fail("accepted an id outside the vocabulary");
    total += static_cast<int64_t>(input.size());
  }
  if (total != request.prompt_tokens) fail("prompt_tokens is not the inputs' total");
  if (total > limits.max_total_tokens) fail("accepted more tokens than the limit");
  std::vector<std::vector<float>> vectors(request.inputs.size(), std::vector<float>(kWidth, 0.25f));
  auto copy = request;
  for (bool base64 : {false, true}) {
    copy.base64 = base64;
    if (mb::server::embeddings_response(copy, vectors).dump().empty()) fail("an empty response");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view body(reinterpret_cast<const char*>(data), size);
  mb::server::EmbeddingsLimits limits;
  limits.max_inputs = 8;
  limits.max_total_tokens = 64;
  limits.max_input_tokens = 16;
  const mb::server::EmbeddingsModel model{&fuzz_tokenizer(), kVocab, kWidth};
  mb::fuzz::expect_clean_refusal(
      [&] { check_accepted(mb::server::parse_embeddings_request(body, model, limits, "fuzz"), limits); });
  return 0;
}

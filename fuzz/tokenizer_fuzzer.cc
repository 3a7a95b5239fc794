// SPDX-License-Identifier: MIT
// Fuzzes the tokenizer. The first input byte selects what the rest is:
//   mode 0: a tokenizer.json, loaded, then used to encode a fixed text and decode its own ids;
//   mode 1: text, encoded with fixed good tokenizers (byte-level and SentencePiece-style), then
//           decoded again, in one call and token by token;
//   mode 2: token ids (16-bit little-endian), decoded by the fixed tokenizers.
// Token-by-token decoding must equal decode() of the same ids (tokenizer.h promises it), which
// the harness checks as well as the absence of crashes.
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "fuzz_support.h"
#include "tokenizer/tokenizer.h"

#ifndef MB_FUZZ_TEST_DATA_DIR
#error "MB_FUZZ_TEST_DATA_DIR must name tests/data"
#endif

namespace {

std::vector<mb::Tokenizer>* good = nullptr;

void check_streaming(const mb::Tokenizer& tokenizer, const std::vector<int32_t>& ids, bool skip_special) {
  std::string whole;
  try {
    whole = tokenizer.decode(ids, skip_special);
  } catch (const mb::Error&) {
    return;  // an id without a token; the stream decoder refuses it too, at some push
  }
  mb::StreamDecoder stream(tokenizer, skip_special);
  std::string pieces;
  for (int32_t id : ids) pieces += stream.push(id);
  pieces += stream.finish();
  if (pieces != whole) {
    std::fprintf(stderr, "streamed decode (%zu bytes) differs from decode() (%zu bytes)\n", pieces.size(),
                 whole.size());
    std::abort();
  }
}

void exercise(const mb::Tokenizer& tokenizer, std::string_view text) {
  const std::vector<int32_t> ids = tokenizer.encode(text);
  for (int32_t id : ids) {
    if (id < 0 || id >= tokenizer.vocab_size()) {
      std::fprintf(stderr, "encode produced id %d outside [0, %d)\n", id, tokenizer.vocab_size());
      std::abort();
    }
  }
  check_streaming(tokenizer, ids, false);
  check_streaming(tokenizer, ids, true);
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  static std::vector<mb::Tokenizer> tokenizers;
  const std::string byte_level = mb::fuzz::scratch_dir() + "/byte_level.json";
  mb::write_byte_level_tokenizer_json(byte_level, 400);
  tokenizers.push_back(mb::Tokenizer::from_json_file(byte_level));
  tokenizers.push_back(
      mb::Tokenizer::from_json_file(MB_FUZZ_TEST_DATA_DIR "/tokenizers/llama2/tokenizer.json"));
  good = &tokenizers;
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string_view rest(reinterpret_cast<const char*>(data + 1), size - 1);
  switch (data[0] % 3) {
    case 0:
      mb::fuzz::expect_clean_refusal([&] {
        const mb::Tokenizer tokenizer = mb::Tokenizer::from_json_string(rest, "fuzz/tokenizer.json");
        exercise(tokenizer, "Hello world! ñ 日本 <|endoftext|>  \t\n x");
        std::vector<int32_t> all_ids;
        for (int32_t id = 0; id < std::min(tokenizer.vocab_size(), 64); ++id) all_ids.push_back(id);
        check_streaming(tokenizer, all_ids, false);
        check_streaming(tokenizer, all_ids, true);
      });
      break;
    case 1:
      for (const mb::Tokenizer& tokenizer : *good)
        mb::fuzz::expect_clean_refusal([&] { exercise(tokenizer, rest); });
      break;
    case 2: {
      std::vector<int32_t> ids;
      for (size_t i = 0; i + 1 < rest.size(); i += 2) {
        uint16_t id;
        std::memcpy(&id, rest.data() + i, 2);
        ids.push_back(id);
      }
      for (const mb::Tokenizer& tokenizer : *good) {
        check_streaming(tokenizer, ids, false);
        check_streaming(tokenizer, ids, true);
      }
      break;
    }
  }
  return 0;
}

// SPDX-License-Identifier: MIT
// Regression tests for tokenizer files found by fuzzing (fuzz/tokenizer_fuzzer.cc, FUZZING.md):
// each malformed file ends in an mb::Error that names it, never in a stack overflow, a foreign
// exception or an unbounded error message.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <functional>

#include "common/test_util.h"
#include "core/error.h"
#include "tokenizer/tokenizer.h"

namespace mb {
namespace {

std::string load_error(const std::string& text) {
  const std::string path = test::make_temp_dir("untrusted_tokenizer") + "/tokenizer.json";
  std::ofstream(path, std::ios::binary | std::ios::trunc) << text;
  std::string message = test::error_of([&] { Tokenizer::from_json_file(path); });
  EXPECT_NE(message.find(path), std::string::npos) << message;
  return message;
}

TEST(UntrustedTokenizerJson, DeepNestingIsRefusedWhileParsing) {
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  const std::string message = load_error("{\"model\": {\"type\": \"BPE\", \"vocab\": " + deep + "}}");
  EXPECT_NE(message.find("nest deeper than 128"), std::string::npos) << message;
}

TEST(UntrustedTokenizerJson, OutOfRangeNumbersAreAnErrorNamingTheFile) {
  for (const char* number : {"1e400", "-1e400"}) {
    SCOPED_TRACE(number);
    const std::string message = load_error(std::string("{\"model\": {\"type\": \"BPE\", \"dropout\": ") +
                                           number + ", \"vocab\": {}}}");
    EXPECT_NE(message.find("not valid JSON"), std::string::npos) << message;
  }
}

TEST(UntrustedTokenizerJson, ErrorMessagesQuoteAtMostAnExcerptOfAValue) {
  std::string long_list = "[";
  for (int i = 0; i < 100000; ++i) long_list += "1,";
  long_list += "1]";
  const std::string message =
      load_error("{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": " + long_list + "}, \"merges\": []}}");
  EXPECT_LT(message.size(), 400u);
}

}  // namespace
}  // namespace mb

// SPDX-License-Identifier: MIT
// The limits of tokenizer.json pipelines (pipeline_limits.h): hostile files whose normalizer or
// pre-tokenizer doubled the text at every step ran for a minute and exhausted memory; now a
// Sequence is bounded in length and depth when the file loads, and every run of the normalizer
// and pre-tokenizer is bounded in the text it builds and the bytes it writes.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "common/timing.h"
#include "core/error.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/tokenizer_test_support.h"

namespace mb {
namespace {

using nlohmann::json;

json replace(const std::string& pattern, const std::string& content) {
  return {{"type", "Replace"}, {"pattern", {{"String", pattern}}}, {"content", content}};
}

json sequence(const char* key, int count, const json& step) {
  json steps = json::array();
  for (int i = 0; i < count; ++i) steps.push_back(step);
  return {{"type", "Sequence"}, {key, steps}};
}

json byte_level() {
  return {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", true}};
}

// The tiny byte-level tokenizer with `stage` ("normalizer", "pre_tokenizer" or "decoder") set.
Tokenizer with_stage(const char* stage, const json& config) {
  json file = test::tiny_tokenizer_json({});
  file[stage] = config;
  return Tokenizer::from_json_string(file.dump(), "hostile.json");
}

std::string load_error(const char* stage, const json& config) {
  try {
    with_stage(stage, config);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

std::string encode_error(const Tokenizer& tokenizer, const std::string& text) {
  try {
    tokenizer.encode(text);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(PipelineLimits, DoublingNormalizersAreStoppedByTheLengthBudget) {
  // The reproducer: 40 Replace steps "a" -> "aa" took 60 s and 2.5 GB on one "a".
  const Tokenizer t = with_stage("normalizer", sequence("normalizers", 40, replace("a", "aa")));
  std::string message;
  const double seconds = test::least_cpu_seconds([&] { message = encode_error(t, "a"); }, 1);
  EXPECT_EQ(message,
            "hostile.json: the normalizer turns a 1-byte text into more than 4112 bytes (its limit: 16 times "
            "the text plus 4096)");
  EXPECT_LT(seconds, test::scaled_seconds(1.0));
  // Text without the pattern passes every step unchanged.
  EXPECT_EQ(t.encode("bc"), (std::vector<int32_t>{'b', 'c'}));
  // One Replace growing its text far past the limit stops before it builds the text.
  const Tokenizer wide = with_stage("normalizer", replace("a", std::string(100000, 'b')));
  EXPECT_NE(encode_error(wide, std::string(1000, 'a')).find("into more than 20096 bytes"), std::string::npos);
  const Tokenizer prepend =
      with_stage("normalizer", {{"type", "Prepend"}, {"prepend", std::string(5000, 'p')}});
  EXPECT_NE(encode_error(prepend, "x").find("the normalizer turns a 1-byte text"), std::string::npos);
}

TEST(PipelineLimits, RealGrowthStaysWithinTheBudget) {
  // SentencePiece's "▁" for every space triples a text of spaces; NFKC expands U+FDFA elevenfold.
  const json llama = {
      {"type", "Sequence"},
      {"normalizers", {{{"type", "Prepend"}, {"prepend", "\u2581"}}, replace(" ", "\u2581")}}};
  EXPECT_EQ(encode_error(with_stage("normalizer", llama), std::string(100000, ' ')), "");
  std::string ligatures;
  for (int i = 0; i < 20000; ++i) ligatures += "\uFDFA";
  const json nfkc = {{"type", "Sequence"}, {"normalizers", {{{"type", "NFKC"}}, replace(" ", "\u2581")}}};
  EXPECT_EQ(encode_error(with_stage("normalizer", nfkc), ligatures), "");
}

TEST(PipelineLimits, TheWorkBudgetBoundsManyStepsThatEachStayShortEnough) {
  // Each step keeps the text under the length limit, but 64 passes over a 16-fold text write
  // more than 8 times that limit.
  json steps = json::array({replace("a", std::string(16, 'a'))});
  for (int i = 0; i < 63; ++i) steps.push_back(replace("z", "y"));
  const Tokenizer t = with_stage("normalizer", {{"type", "Sequence"}, {"normalizers", steps}});
  const std::string message = encode_error(t, std::string(10000, 'a'));
  EXPECT_NE(message.find("the normalizer writes more than"), std::string::npos) << message;
  EXPECT_NE(message.find("its work limit"), std::string::npos) << message;
}

TEST(PipelineLimits, SequencesAreBoundedInLengthAndDepthWhenTheFileLoads) {
  // The reproducer: 100,000 ByteLevel pre-tokenizers ran 38 s, then bad_alloc.
  std::string message;
  const double seconds = test::least_cpu_seconds(
      [&] { message = load_error("pre_tokenizer", sequence("pretokenizers", 100000, byte_level())); }, 1);
  EXPECT_EQ(message, "hostile.json: pre_tokenizer Sequence has 100000 steps, more than 64");
  EXPECT_LT(seconds, test::scaled_seconds(2.0));
  EXPECT_EQ(load_error("normalizer", sequence("normalizers", 65, {{"type", "NFC"}})),
            "hostile.json: normalizer Sequence has 65 steps, more than 64");
  EXPECT_EQ(load_error("decoder", sequence("decoders", 65, {{"type", "Fuse"}})),
            "hostile.json: decoder Sequence has 65 steps, more than 64");
  EXPECT_EQ(load_error("normalizer", sequence("normalizers", 64, {{"type", "NFC"}})), "");
  // Nested Sequences count their steps together, and nest at most 8 deep.
  EXPECT_EQ(
      load_error("normalizer", sequence("normalizers", 8, sequence("normalizers", 9, {{"type", "NFC"}}))),
      "hostile.json: normalizer has more than 64 steps");
  json nested = {{"type", "NFC"}};
  for (int i = 0; i < 8; ++i) nested = sequence("normalizers", 1, nested);
  EXPECT_EQ(load_error("normalizer", nested), "");
  EXPECT_EQ(load_error("normalizer", sequence("normalizers", 1, nested)),
            "hostile.json: normalizer Sequences nest deeper than 8 levels");
}

TEST(PipelineLimits, ByteLevelChainsAreStoppedByTheLengthBudget) {
  // Each ByteLevel step maps every non-ASCII byte to a two-byte character, doubling the text.
  const Tokenizer t = with_stage("pre_tokenizer", sequence("pretokenizers", 64, byte_level()));
  const std::string message = encode_error(t, "hello world");
  EXPECT_EQ(message,
            "hostile.json: the pre_tokenizer turns a 11-byte text into more than 4272 bytes (its limit: 16 "
            "times the text plus 4096)");
  // Two ByteLevel steps are a legal (if odd) pipeline and still tokenize.
  EXPECT_EQ(
      encode_error(with_stage("pre_tokenizer", sequence("pretokenizers", 2, byte_level())), "hello world"),
      "");
}

TEST(PipelineLimits, DecoderReplaceChainsThatGrowTokensAreRefused) {
  EXPECT_EQ(
      load_error("decoder", sequence("decoders", 5, replace("a", "aa"))),
      "hostile.json: the decoder's Replace steps can make a token's text 32 times longer, more than 16");
  // SentencePiece's decoder Replace shrinks the text and stays allowed, as does a modest growth.
  EXPECT_EQ(load_error("decoder", replace("\u2581", " ")), "");
  EXPECT_EQ(load_error("decoder", sequence("decoders", 4, replace("a", "aa"))), "");
}

}  // namespace
}  // namespace mb

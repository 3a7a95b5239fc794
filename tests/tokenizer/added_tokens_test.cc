// SPDX-License-Identifier: MIT
// Added-token splitting: leftmost-longest matching, the strip and single-word options, and the
// split between tokens matched on raw text and tokens matched after normalization.
#include <gtest/gtest.h>

#include <algorithm>

#include "tokenizer/tokenizer.h"
#include "tokenizer/tokenizer_test_support.h"

namespace mb {
namespace {

using nlohmann::json;

json added(const std::string& content, json options = json::object()) {
  json token = {{"content", content}, {"normalized", false}, {"special", false}};
  for (const auto& [key, value] : options.items()) token[key] = value;
  return token;
}

// Takes a vector because a braced list of one json object would become that object, not an array.
Tokenizer tokenizer_with(const std::vector<json>& added_tokens, const json& normalizer = nullptr) {
  return Tokenizer::from_json_string(test::tiny_tokenizer_json({}, json(added_tokens), normalizer).dump(),
                                     "tiny");
}

// Without merges every byte of plain text is its own token, whose id is the byte value.
std::vector<int32_t> bytes_of(std::string_view text) {
  std::vector<int32_t> ids;
  for (char c : text) ids.push_back(static_cast<unsigned char>(c));
  return ids;
}

std::vector<int32_t> concat(std::initializer_list<std::vector<int32_t>> parts) {
  std::vector<int32_t> ids;
  for (const auto& part : parts) ids.insert(ids.end(), part.begin(), part.end());
  return ids;
}

TEST(AddedTokens, NewTokensAreNumberedAfterTheVocabularyInFileOrder) {
  const Tokenizer t = tokenizer_with({added("<a>"), added("<b>"), added("a")});
  EXPECT_EQ(t.token_to_id("<a>"), 256);
  EXPECT_EQ(t.token_to_id("<b>"), 257);
  // A token already in the vocabulary keeps its id, like HF.
  EXPECT_EQ(t.token_to_id("a"), 'a');
  EXPECT_EQ(t.vocab_size(), 258);
}

TEST(AddedTokens, LongestTokenWinsAtTheSamePosition) {
  const Tokenizer t = tokenizer_with({added("<a>"), added("<a><b>"), added("<b>")});
  EXPECT_EQ(t.encode("x<a><b>y<b><a>"), concat({bytes_of("x"), {257}, bytes_of("y"), {258, 256}}));
}

TEST(AddedTokens, LeftmostMatchWinsOverALongerLaterOne) {
  const Tokenizer t = tokenizer_with({added("bcd"), added("abc")});
  const int32_t bcd = 256;
  const int32_t abc = 257;
  EXPECT_EQ(t.encode("abcd"), concat({{abc}, bytes_of("d")}));
  EXPECT_EQ(t.encode("xbcd"), concat({bytes_of("x"), {bcd}}));
  EXPECT_EQ(t.encode("abcbcd"), concat({{abc}, {bcd}}));
}

TEST(AddedTokens, MatchesAreNotOverlapping) {
  const Tokenizer t = tokenizer_with({added("aa")});
  EXPECT_EQ(t.encode("aaaaa"), concat({{256, 256}, bytes_of("a")}));
}

TEST(AddedTokens, LstripAndRstripAbsorbSurroundingWhiteSpace) {
  const Tokenizer t = tokenizer_with({added("<m>", {{"lstrip", true}, {"rstrip", true}})});
  EXPECT_EQ(t.encode("a \t <m>  \n b"), concat({bytes_of("a"), {256}, bytes_of("b")}));
  const Tokenizer left_only = tokenizer_with({added("<m>", {{"lstrip", true}})});
  // The space kept after the token starts the next word.
  EXPECT_EQ(left_only.encode("a  <m> b"), concat({bytes_of("a"), {256}, bytes_of(" b")}));
}

TEST(AddedTokens, SingleWordTokensDoNotMatchInsideWords) {
  const Tokenizer t = tokenizer_with({added("hi", {{"single_word", true}})});
  EXPECT_EQ(t.encode("hi there"), concat({{256}, bytes_of(" there")}));
  EXPECT_EQ(t.encode("this"), bytes_of("this"));
  EXPECT_EQ(t.encode("say hi!"), concat({bytes_of("say "), {256}, bytes_of("!")}));
}

TEST(AddedTokens, NormalizedTokensMatchTheNormalizedText) {
  const json nfc = {{"type", "NFC"}};
  const std::string nfc_cafe = "caf\xc3\xa9";
  const std::string nfd_cafe = "cafe\xcc\x81";
  const Tokenizer normalized = tokenizer_with({added(nfc_cafe, {{"normalized", true}})}, nfc);
  EXPECT_EQ(normalized.encode(nfd_cafe), std::vector<int32_t>{256});
  EXPECT_EQ(normalized.encode(nfc_cafe), std::vector<int32_t>{256});
  // A normalized token written in NFD is normalized before matching, so it matches both too.
  const Tokenizer nfd_content = tokenizer_with({added(nfd_cafe, {{"normalized", true}})}, nfc);
  EXPECT_EQ(nfd_content.encode(nfc_cafe), std::vector<int32_t>{256});

  // A non-normalized token is matched on the raw text, before NFC runs.
  const Tokenizer raw = tokenizer_with({added(nfd_cafe)}, nfc);
  EXPECT_EQ(raw.encode(nfd_cafe), std::vector<int32_t>{256});
  EXPECT_NE(raw.encode(nfc_cafe), std::vector<int32_t>{256});
}

TEST(AddedTokens, SpecialTokensAreSkippedOnRequestAndOthersAreKept) {
  const Tokenizer t = tokenizer_with({added("<s>", {{"special", true}}), added("<tool>")});
  const auto ids = t.encode("a<s>b<tool>");
  EXPECT_EQ(ids, concat({bytes_of("a"), {256}, bytes_of("b"), {257}}));
  EXPECT_TRUE(t.is_special(256));
  EXPECT_FALSE(t.is_special(257));
  EXPECT_FALSE(t.is_special('a'));
  EXPECT_EQ(t.decode(ids), "a<s>b<tool>");
  EXPECT_EQ(t.decode(ids, true), "ab<tool>");
}

TEST(AddedTokens, GptNeoxSpaceRunsAreAddedTokensButNotSpecial) {
  const Tokenizer& t = test::fixture_tokenizer("gpt-neox-20b");
  EXPECT_EQ(t.token_to_id(std::string(24, ' ')), 50254);
  EXPECT_EQ(t.token_to_id("  "), 50276);
  EXPECT_FALSE(t.is_special(50276));
  EXPECT_TRUE(t.is_special(0));
  EXPECT_TRUE(t.is_special(1));
  // 25 spaces: the longest run token (24) first, then the last space joins the next word.
  const auto ids = t.encode("a" + std::string(25, ' ') + "b");
  ASSERT_EQ(ids.size(), 3u);
  EXPECT_EQ(ids[1], 50254);
  EXPECT_EQ(t.decode(ids), "a" + std::string(25, ' ') + "b");
}

TEST(AddedTokens, EndOfTextTokensOfTheFixtures) {
  EXPECT_EQ(test::fixture_tokenizer("gpt-neox-20b").eos_token_ids(), std::vector<int32_t>{0});
  EXPECT_EQ(test::fixture_tokenizer("gpt2").eos_token_ids(), std::vector<int32_t>{50256});
  const Tokenizer& llama3 = test::fixture_tokenizer("llama3");
  const auto llama3_eos = llama3.eos_token_ids();
  EXPECT_NE(std::find(llama3_eos.begin(), llama3_eos.end(), *llama3.token_to_id("<|end_of_text|>")),
            llama3_eos.end());
  EXPECT_NE(std::find(llama3_eos.begin(), llama3_eos.end(), *llama3.token_to_id("<|eot_id|>")),
            llama3_eos.end());
  const Tokenizer& qwen3 = test::fixture_tokenizer("qwen3");
  EXPECT_EQ(qwen3.eos_token_ids(),
            (std::vector<int32_t>{*qwen3.token_to_id("<|endoftext|>"), *qwen3.token_to_id("<|im_end|>")}));
}

}  // namespace
}  // namespace mb

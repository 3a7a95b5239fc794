// SPDX-License-Identifier: MIT
// Lossy UTF-8 handling on both sides: invalid input text before encoding, and byte tokens that
// do not form whole characters when decoding, at once or as a stream.
#include <gtest/gtest.h>

#include <random>

#include "tokenizer/tokenizer.h"
#include "tokenizer/tokenizer_test_support.h"
#include "tokenizer/utf8.h"

namespace mb {
namespace {

const std::string kReplacement = "\xef\xbf\xbd";

std::string repeat(const std::string& s, int n) {
  std::string out;
  for (int i = 0; i < n; ++i) out += s;
  return out;
}

TEST(Utf8, LossyConversionReplacesEachMaximalIllFormedSubpart) {
  struct Case {
    std::string bytes;
    std::string expected;
  };
  const std::vector<Case> cases = {
      {"plain", "plain"},
      {"\xff", kReplacement},
      {"a\xfe"
       "b",
       "a" + kReplacement + "b"},
      {"\xc3", kReplacement},
      {"\xe2\x82", kReplacement},                     // truncated 3-byte sequence: one
      {"\xe2\x82(", kReplacement + "("},              // broken by ASCII
      {"\xf0\x9f\x98", kReplacement},                 // truncated 4-byte sequence: one
      {"\xed\xa0\x80", repeat(kReplacement, 3)},      // surrogate: E0 needs A0..9F after ED
      {"\xc0\xaf", repeat(kReplacement, 2)},          // overlong
      {"\xe0\x80\xaf", repeat(kReplacement, 3)},      // overlong 3-byte
      {"\xf4\x90\x80\x80", repeat(kReplacement, 4)},  // above U+10FFFF
      {"\x80\xbf", repeat(kReplacement, 2)},          // lone continuation bytes
      {"\xf0\x9f\x98\x80\x80", "\xf0\x9f\x98\x80" + kReplacement},
  };
  for (const auto& c : cases) {
    EXPECT_EQ(tok::to_valid_utf8(c.bytes), c.expected) << test::escape(c.bytes);
    EXPECT_EQ(tok::is_valid_utf8(c.bytes), c.bytes == c.expected) << test::escape(c.bytes);
  }
}

TEST(Utf8, NonFinalConversionHoldsBackAnIncompleteTail) {
  std::string out;
  EXPECT_EQ(tok::append_lossy_utf8(out, "ab\xf0\x9f", false), 2u);
  EXPECT_EQ(out, "ab");
  out.clear();
  // A tail that can no longer become valid is replaced at once.
  EXPECT_EQ(tok::append_lossy_utf8(out, "ab\xf0\x41", false), 4u);
  EXPECT_EQ(out, "ab" + kReplacement + "A");
}

TEST(Utf8, InvalidInputIsEncodedAsItsLossyConversion) {
  const Tokenizer& t = test::fixture_tokenizer("gpt-neox-20b");
  const std::string invalid = "caf\xc3\xa9 \xff\xfe na\xe2\x82";
  EXPECT_EQ(t.encode(invalid), t.encode(tok::to_valid_utf8(invalid)));
  EXPECT_EQ(t.decode(t.encode(invalid)), "caf\xc3\xa9 " + kReplacement + kReplacement + " na" + kReplacement);
}

TEST(Utf8, RandomBytesAreEncodedLikeTheirLossyConversion) {
  std::mt19937 rng(7);
  // Bytes drawn mostly from the ranges that make up multi-byte sequences, so that almost every
  // string mixes valid characters with broken ones.
  const std::string alphabet =
      std::string("ab <|endoftext|>\n\t'sS0") + "\x80\x9f\xbf\xc2\xc3\xe0\xe2\xed\xf0\xf4\xff";
  for (const char* name : {"gpt-neox-20b", "qwen3"}) {
    const Tokenizer& t = test::fixture_tokenizer(name);
    for (int round = 0; round < 300; ++round) {
      std::string bytes(rng() % 40, ' ');
      for (char& c : bytes) c = alphabet[rng() % alphabet.size()];
      const auto ids = t.encode(bytes);
      ASSERT_EQ(ids, t.encode(tok::to_valid_utf8(bytes))) << name << " " << test::escape(bytes);
      ASSERT_TRUE(tok::is_valid_utf8(t.decode(ids)));
    }
  }
}

TEST(StreamDecoder, HoldsAnEmojiSplitAcrossByteTokensUntilItIsComplete) {
  const Tokenizer t =
      Tokenizer::from_json_string(test::tiny_tokenizer_json({}).dump(), "tiny");  // one token per byte
  const std::string emoji = "\xf0\x9f\x98\x80";
  const auto ids = t.encode("a" + emoji + "b");
  ASSERT_EQ(ids.size(), 6u);
  StreamDecoder stream(t);
  EXPECT_EQ(stream.push(ids[0]), "a");
  EXPECT_EQ(stream.push(ids[1]), "");
  EXPECT_EQ(stream.push(ids[2]), "");
  EXPECT_EQ(stream.push(ids[3]), "");
  EXPECT_EQ(stream.push(ids[4]), emoji);
  EXPECT_EQ(stream.push(ids[5]), "b");
  EXPECT_EQ(stream.finish(), "");
}

TEST(StreamDecoder, FinishFlushesAnIncompleteCharacterAsReplacement) {
  const Tokenizer t = Tokenizer::from_json_string(test::tiny_tokenizer_json({}).dump(), "tiny");
  const auto ids = t.encode("x\xf0\x9f\x98\x80");
  StreamDecoder stream(t);
  std::string text;
  for (size_t i = 0; i + 1 < ids.size(); ++i) text += stream.push(ids[i]);
  EXPECT_EQ(text, "x");
  EXPECT_EQ(stream.finish(), kReplacement);
  const std::vector<int32_t> truncated(ids.begin(), ids.end() - 1);
  EXPECT_EQ(t.decode(truncated), "x" + kReplacement);
}

TEST(StreamDecoder, BrokenSequenceInTheMiddleIsReplacedAtOnce) {
  const Tokenizer t = Tokenizer::from_json_string(test::tiny_tokenizer_json({}).dump(), "tiny");
  StreamDecoder stream(t);
  EXPECT_EQ(stream.push(0xf0), "");
  EXPECT_EQ(stream.push(0x9f), "");
  EXPECT_EQ(stream.push('A'), kReplacement + "A");
}

TEST(StreamDecoder, GptNeoxEmojiTokensStreamAsWholeCharacters) {
  const Tokenizer& t = test::fixture_tokenizer("gpt-neox-20b");
  const std::string text =
      "family: \xf0\x9f\x91\xa8\xe2\x80\x8d\xf0\x9f\x91\xa9\xe2\x80\x8d\xf0\x9f\x91\xa7 ok";
  const auto ids = t.encode(text);
  StreamDecoder stream(t);
  std::string streamed;
  for (int32_t id : ids) {
    const std::string chunk = stream.push(id);
    EXPECT_TRUE(tok::is_valid_utf8(chunk)) << test::escape(chunk);
    streamed += chunk;
  }
  streamed += stream.finish();
  EXPECT_EQ(streamed, text);
}

TEST(StreamDecoder, SkipsSpecialTokensWhenAsked) {
  const Tokenizer& t = test::fixture_tokenizer("gpt-neox-20b");
  const auto ids = t.encode("a<|endoftext|>b");
  StreamDecoder keep(t);
  StreamDecoder skip(t, true);
  std::string kept;
  std::string skipped;
  for (int32_t id : ids) {
    kept += keep.push(id);
    skipped += skip.push(id);
  }
  EXPECT_EQ(kept + keep.finish(), "a<|endoftext|>b");
  EXPECT_EQ(skipped + skip.finish(), "ab");
}

}  // namespace
}  // namespace mb

// SPDX-License-Identifier: MIT
// SentencePiece-style BPE on a tiny tokenizer.json: byte fallback, unknown characters, the
// decoder chain (Replace, ByteFallback, Fuse, Strip, Metaspace) and how it streams. The
// expected ids and texts are what Hugging Face tokenizers 0.23.2 returns for the same files.
#include <gtest/gtest.h>

#include "core/error.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/tokenizer_test_support.h"
#include "tokenizer/utf8.h"

namespace mb {
namespace {

using nlohmann::json;
using Ids = std::vector<int32_t>;

const std::string kReplacement = "\xef\xbf\xbd";

struct TinyOptions {
  bool byte_fallback = true;
  bool fuse_unk = true;
  int missing_byte = -1;  // a <0xNN> token left out of the vocabulary
  json decoder = nullptr;
};

// <unk> <s> </s> at 0..2, the byte tokens from 3 (258 with all 256 present), then "▁" "a" "b"
// "c" "▁a" "ab" "▁ab" "a▁" "▁▁a▁▁" (259..267 with all bytes), Llama-2's normalizer and no
// pre-tokenizer.
json tiny_sentencepiece_json(const TinyOptions& options = {}) {
  json vocab = {{"<unk>", 0}, {"<s>", 1}, {"</s>", 2}};
  int32_t id = 3;
  static const char* hex = "0123456789ABCDEF";
  for (int byte = 0; byte < 256; ++byte) {
    if (byte == options.missing_byte) continue;
    vocab[std::string("<0x") + hex[byte >> 4] + hex[byte & 15] + ">"] = id++;
  }
  for (const char* token :
       {"\u2581", "a", "b", "c", "\u2581a", "ab", "\u2581ab", "a\u2581", "\u2581\u2581a\u2581\u2581"}) {
    vocab[token] = id++;
  }
  json added = json::array();
  for (int i = 0; i < 3; ++i) {
    const char* content = i == 0 ? "<unk>" : i == 1 ? "<s>" : "</s>";
    added.push_back({{"id", i}, {"content", content}, {"normalized", false}, {"special", true}});
  }
  const json replace_marker = {{"type", "Replace"}, {"pattern", {{"String", "\u2581"}}}, {"content", " "}};
  json decoder = options.decoder;
  if (decoder.is_null()) {
    decoder = {{"type", "Sequence"},
               {"decoders",
                {replace_marker,
                 {{"type", "ByteFallback"}},
                 {{"type", "Fuse"}},
                 {{"type", "Strip"}, {"content", " "}, {"start", 1}, {"stop", 0}}}}};
  }
  return {{"version", "1.0"},
          {"added_tokens", added},
          {"normalizer",
           {{"type", "Sequence"},
            {"normalizers",
             {{{"type", "Prepend"}, {"prepend", "\u2581"}},
              {{"type", "Replace"}, {"pattern", {{"String", " "}}}, {"content", "\u2581"}}}}}},
          {"pre_tokenizer", nullptr},
          {"decoder", decoder},
          {"model",
           {{"type", "BPE"},
            {"unk_token", "<unk>"},
            {"fuse_unk", options.fuse_unk},
            {"byte_fallback", options.byte_fallback},
            {"vocab", vocab},
            {"merges", json::array({json::array({"\u2581", "a"}), json::array({"a", "b"}),
                                    json::array({"\u2581a", "b"})})}}}};
}

Tokenizer tiny(const TinyOptions& options = {}) {
  return Tokenizer::from_json_string(tiny_sentencepiece_json(options).dump(), "tiny-sp");
}

json replace_marker_step() {
  return {{"type", "Replace"}, {"pattern", {{"String", "\u2581"}}}, {"content", " "}};
}

json strip_step(int start, int stop) {
  return {{"type", "Strip"}, {"content", " "}, {"start", start}, {"stop", stop}};
}

std::string streamed(const Tokenizer& t, const Ids& ids, bool skip_special = false) {
  StreamDecoder stream(t, skip_special);
  std::string text;
  for (int32_t id : ids) text += stream.push(id);
  return text + stream.finish();
}

TEST(SentencePiece, CharactersOutsideTheVocabularyFallBackToTheirBytes) {
  const Tokenizer t = tiny();
  EXPECT_EQ(t.encode("ab a \xc3\xa9"), (Ids{265, 263, 259, 198, 172}));  // é is <0xC3> <0xA9>
  EXPECT_EQ(t.encode("x\xe2\x82\xac"), (Ids{259, 123, 229, 133, 175}));  // x and € as bytes
  EXPECT_EQ(t.decode(t.encode("ab a \xc3\xa9")), "ab a \xc3\xa9");
}

TEST(SentencePiece, WithoutByteFallbackUnknownCharactersBecomeUnkAndRunsFuse) {
  const Tokenizer fused = tiny({.byte_fallback = false});
  EXPECT_EQ(fused.encode("ab \xc3\xa9\xc3\xa9 a"), (Ids{265, 259, 0, 263}));
  EXPECT_EQ(fused.encode("\xc3\xa9x\xc3\xa9"), (Ids{259, 0}));
  const Tokenizer separate = tiny({.byte_fallback = false, .fuse_unk = false});
  EXPECT_EQ(separate.encode("ab \xc3\xa9\xc3\xa9 a"), (Ids{265, 259, 0, 0, 263}));
}

// With <0xC3> missing, é cannot fall back and becomes <unk>; Hugging Face keeps that unknown
// token pending while the next character falls back to bytes, so it lands after them and
// fuses with the following é.
TEST(SentencePiece, UnknownTokenStaysPendingAcrossByteFallback) {
  const Tokenizer t = tiny({.missing_byte = 0xC3});
  EXPECT_EQ(t.encode("\xc3\xa9\xe2\x82\xac\xc3\xa9"), (Ids{258, 228, 133, 175, 0}));
  EXPECT_EQ(t.encode("a\xc3\xa9\xe2\x82\xac\xc3\xa9"
                     "b"),
            (Ids{262, 228, 133, 175, 0, 260}));
}

TEST(SentencePiece, ByteRunThatIsNotValidUtf8BecomesOneReplacementPerByte) {
  const Tokenizer t = tiny();
  const int32_t e4 = 3 + 0xE4, bd = 3 + 0xBD, a0 = 3 + 0xA0, ff = 3 + 0xFF;
  EXPECT_EQ(t.decode(Ids{e4, bd, a0}), "\xe4\xbd\xa0");
  // Not "你" plus one U+FFFD, as a lossy UTF-8 conversion would give: the whole run is replaced.
  EXPECT_EQ(t.decode(Ids{e4, bd, a0, ff}), kReplacement + kReplacement + kReplacement + kReplacement);
  // A special token cuts the run unless it is skipped, which joins the halves again.
  EXPECT_EQ(t.decode(Ids{e4, 2, bd, a0}), kReplacement + "</s>" + kReplacement + kReplacement);
  EXPECT_EQ(t.decode(Ids{e4, 2, bd, a0}, true), "\xe4\xbd\xa0");
}

TEST(SentencePiece, StreamHoldsAByteRunUntilTheNextOtherToken) {
  const Tokenizer t = tiny();
  const int32_t e4 = 3 + 0xE4, bd = 3 + 0xBD, a0 = 3 + 0xA0;
  StreamDecoder stream(t);
  EXPECT_EQ(stream.push(263), "a");  // "▁a": the leading space is stripped
  EXPECT_EQ(stream.push(e4), "");
  EXPECT_EQ(stream.push(bd), "");
  EXPECT_EQ(stream.push(a0), "");
  EXPECT_EQ(stream.push(263), "\xe4\xbd\xa0 a");
  EXPECT_EQ(stream.push(e4), "");
  EXPECT_EQ(stream.finish(), kReplacement);
}

TEST(SentencePiece, CopiedStreamContinuesIndependently) {
  const Tokenizer t = tiny();
  const int32_t e4 = 3 + 0xE4, bd = 3 + 0xBD, a0 = 3 + 0xA0;
  StreamDecoder stream(t);
  EXPECT_EQ(stream.push(e4), "");
  StreamDecoder copy = stream;
  EXPECT_EQ(stream.push(bd), "");
  EXPECT_EQ(stream.push(a0), "");
  EXPECT_EQ(stream.finish(), "\xe4\xbd\xa0");
  EXPECT_EQ(copy.push(263), kReplacement + " a");
  EXPECT_EQ(copy.finish(), "");
}

// Strip per token before Fuse, and on the fused text after it, where a stream holds trailing
// characters back until the text ends.
TEST(SentencePiece, StripRemovesLeadingAndTrailingCharactersLikeHuggingFace) {
  const Tokenizer per_token = tiny(
      {.decoder = {
           {"type", "Sequence"},
           {"decoders",
            {replace_marker_step(), strip_step(2, 1), {{"type", "ByteFallback"}}, {{"type", "Fuse"}}}}}});
  const Tokenizer fused = tiny(
      {.decoder = {
           {"type", "Sequence"},
           {"decoders",
            {replace_marker_step(), {{"type", "ByteFallback"}}, {{"type", "Fuse"}}, strip_step(2, 2)}}}});
  struct Case {
    const Tokenizer& t;
    Ids ids;
    std::string text;
    std::string text_skip_special;
  };
  const std::vector<Case> cases = {
      {per_token, {267, 266, 263}, "a aa", "a aa"},
      {per_token, {263, 260, 266, 267}, "aaaa ", "aaaa "},
      {per_token,
       {266, 266, 3 + 0xC3, 3 + 0xA9, 267},
       "aa\xc3\xa9"
       "a ",
       "aa\xc3\xa9"
       "a "},
      {fused, {267, 266, 263, 259, 259, 259}, "a  a  a ", "a  a  a "},
      {fused, {263, 1, 259, 266, 259}, "a<s> a", "a a"},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(c.t.decode(c.ids), c.text) << test::join_ids(c.ids);
    EXPECT_EQ(c.t.decode(c.ids, true), c.text_skip_special) << test::join_ids(c.ids);
    EXPECT_EQ(streamed(c.t, c.ids), c.text) << test::join_ids(c.ids);
    EXPECT_EQ(streamed(c.t, c.ids, true), c.text_skip_special) << test::join_ids(c.ids);
  }
}

// After Fuse every character is in the first token, so a Metaspace decoder drops all markers.
TEST(SentencePiece, MetaspaceDecoderAfterFuseSeesOneFirstToken) {
  const Tokenizer t = tiny({.decoder = {{"type", "Sequence"},
                                        {"decoders",
                                         {{{"type", "ByteFallback"}},
                                          {{"type", "Fuse"}},
                                          {{"type", "Metaspace"},
                                           {"replacement", "\u2581"},
                                           {"prepend_scheme", "always"},
                                           {"split", true}}}}}});
  EXPECT_EQ(t.decode(Ids{263, 263, 259, 266}), "aaa");
  EXPECT_EQ(streamed(t, Ids{263, 263, 259, 266}), "aaa");
}

TEST(SentencePiece, RefusesDecoderChainsItCannotStream) {
  const auto error = [](const json& decoder) {
    try {
      tiny({.decoder = decoder});
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  const json fuse = {{"type", "Fuse"}};
  const json byte_fallback = {{"type", "ByteFallback"}};
  EXPECT_NE(error({{"type", "Sequence"}, {"decoders", {fuse, byte_fallback}}}).find("decoder order"),
            std::string::npos);
  const json long_replace = {{"type", "Replace"}, {"pattern", {{"String", "ab"}}}, {"content", "x"}};
  EXPECT_NE(error({{"type", "Sequence"}, {"decoders", {fuse, long_replace}}}).find("decoder order"),
            std::string::npos);
  EXPECT_NE(
      error({{"type", "Sequence"}, {"decoders", {{{"type", "ByteLevel"}}, fuse}}}).find("mix ByteLevel"),
      std::string::npos);
  const json regex_replace = {{"type", "Replace"}, {"pattern", {{"Regex", "\u2581+"}}}, {"content", " "}};
  EXPECT_NE(error(regex_replace).find("Regex patterns are not supported"), std::string::npos);
  EXPECT_NE(error({{"type", "Strip"}, {"content", "ab"}, {"start", 1}, {"stop", 0}}).find("single character"),
            std::string::npos);
  EXPECT_NE(error({{"type", "CTC"}}).find("unsupported decoder type 'CTC'"), std::string::npos);
  EXPECT_NE(error({{"type", "Sequence"}, {"decoders", json::array()}}).find("Sequence is empty"),
            std::string::npos);
}

}  // namespace
}  // namespace mb

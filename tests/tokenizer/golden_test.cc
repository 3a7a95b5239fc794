// SPDX-License-Identifier: MIT
// Golden tests: every corpus case encoded and decoded by the C++ tokenizer must give exactly
// the ids and text that Hugging Face tokenizers produced (tools/tokenizer_goldens).
#include <gtest/gtest.h>

#include <memory>
#include <sstream>
#include <tuple>

#include "tokenizer/pipeline.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/tokenizer_test_support.h"
#include "tokenizer/utf8.h"

namespace mb {
namespace {

using test::escape;
using test::join_ids;

class GoldenTest : public ::testing::TestWithParam<std::string> {
 protected:
  const Tokenizer& tokenizer() const { return test::fixture_tokenizer(GetParam()); }
  const nlohmann::json& goldens() const { return test::goldens_for(GetParam()); }
};

// Describes the first difference between two id sequences with the tokens around it.
std::string describe_mismatch(const Tokenizer& tokenizer, const test::CorpusCase& c,
                              const std::vector<int32_t>& want, const std::vector<int32_t>& got) {
  size_t first = 0;
  while (first < want.size() && first < got.size() && want[first] == got[first]) ++first;
  const size_t from = first >= 3 ? first - 3 : 0;
  const auto tokens = [&](const std::vector<int32_t>& ids) {
    std::ostringstream out;
    for (size_t i = from; i < ids.size() && i < from + 8; ++i) {
      const auto token = tokenizer.id_to_token(ids[i]);
      out << (i > from ? " " : "") << escape(token ? *token : "?");
    }
    return out.str();
  };
  std::ostringstream out;
  out << "case '" << c.name << "' input " << escape(c.bytes) << "\n  first difference at index " << first
      << " (expected " << want.size() << " ids, got " << got.size() << ")\n  expected from " << from << ": "
      << join_ids(want, from, 8) << " " << tokens(want) << "\n  actual   from " << from << ": "
      << join_ids(got, from, 8) << " " << tokens(got);
  return out.str();
}

TEST_P(GoldenTest, EncodeMatchesReferenceIdsForEveryCorpusCase) {
  const auto& corpus = test::golden_corpus();
  const auto& cases = goldens().at("cases");
  ASSERT_EQ(cases.size(), corpus.size())
      << "goldens.json and corpus.json are out of sync; rerun the generator";
  size_t failures = 0;
  for (size_t i = 0; i < corpus.size(); ++i) {
    ASSERT_EQ(cases[i].at("name"), corpus[i].name);
    const auto want = cases[i].at("ids").get<std::vector<int32_t>>();
    const auto got = tokenizer().encode(corpus[i].bytes);
    if (want != got && failures++ < 5) ADD_FAILURE() << describe_mismatch(tokenizer(), corpus[i], want, got);
  }
  EXPECT_EQ(failures, 0u) << "of " << corpus.size() << " corpus cases";
}

TEST_P(GoldenTest, DecodeOfEncodedCorpusMatchesReferenceText) {
  const auto& corpus = test::golden_corpus();
  const auto& cases = goldens().at("cases");
  ASSERT_EQ(cases.size(), corpus.size());
  for (size_t i = 0; i < corpus.size(); ++i) {
    const auto ids = cases[i].at("ids").get<std::vector<int32_t>>();
    EXPECT_EQ(tokenizer().decode(ids), cases[i].at("decoded").get<std::string>())
        << "case " << corpus[i].name;
    EXPECT_EQ(tokenizer().decode(ids, true), cases[i].at("decoded_skip_special").get<std::string>())
        << "case " << corpus[i].name << " with special tokens skipped";
  }
}

TEST_P(GoldenTest, DecodeOfArbitraryIdsMatchesReferenceLossyText) {
  for (const auto& c : goldens().at("decode_cases")) {
    const auto ids = c.at("ids").get<std::vector<int32_t>>();
    EXPECT_EQ(tokenizer().decode(ids), c.at("text").get<std::string>()) << "ids " << join_ids(ids);
    EXPECT_EQ(tokenizer().decode(ids, true), c.at("text_skip_special").get<std::string>())
        << "ids " << join_ids(ids);
  }
}

// Feeding the ids one at a time must give the same text as decoding them at once, and every
// chunk handed out must be complete UTF-8 (no character is ever cut in two).
TEST_P(GoldenTest, StreamingDecodeEqualsWholeDecode) {
  std::vector<std::vector<int32_t>> sequences;
  for (const auto& c : goldens().at("decode_cases"))
    sequences.push_back(c.at("ids").get<std::vector<int32_t>>());
  for (const auto& c : goldens().at("cases")) sequences.push_back(c.at("ids").get<std::vector<int32_t>>());
  for (const auto& ids : sequences) {
    for (bool skip_special : {false, true}) {
      StreamDecoder stream(tokenizer(), skip_special);
      std::string streamed;
      for (int32_t id : ids) {
        const std::string chunk = stream.push(id);
        ASSERT_TRUE(tok::is_valid_utf8(chunk)) << "chunk " << escape(chunk);
        streamed += chunk;
      }
      streamed += stream.finish();
      ASSERT_EQ(streamed, tokenizer().decode(ids, skip_special)) << "ids " << join_ids(ids);
    }
  }
}

TEST_P(GoldenTest, ValidTextRoundTripsThroughEncodeAndDecode) {
  const auto& cases = goldens().at("cases");
  for (size_t i = 0; i < test::golden_corpus().size(); ++i) {
    const auto& c = test::golden_corpus()[i];
    if (c.invalid_utf8) continue;
    const std::string decoded = tokenizer().decode(tokenizer().encode(c.bytes));
    // The reference's own decode shows what the text becomes: itself for tokenizers without a
    // normalizer, its NFC form for GPT-NeoX and Qwen.
    EXPECT_EQ(decoded, cases[i].at("decoded").get<std::string>()) << "case " << c.name;
    if (GetParam() == "gpt2" || GetParam() == "llama3") {
      EXPECT_EQ(decoded, c.bytes) << "case " << c.name;
    }
  }
}

// Compares the pre-tokenizer's pieces directly: two different splits can give the same ids
// (for example when no merge crosses the boundary), so the ids alone do not pin the regexes.
// Returns how many cases had pieces to compare.
size_t check_pre_tokenizer_pieces(const nlohmann::json& config, const nlohmann::json& cases,
                                  const std::string& source) {
  const auto pre_tokenizer = tok::PreTokenizer::from_json(config.at("pre_tokenizer"), source);
  const auto& corpus = test::golden_corpus();
  size_t checked = 0;
  for (size_t i = 0; i < corpus.size(); ++i) {
    if (!cases[i].contains("pre_tokenized")) continue;
    std::vector<std::string> pieces;
    pre_tokenizer.apply(tok::to_valid_utf8(corpus[i].bytes), pieces);
    EXPECT_EQ(pieces, cases[i].at("pre_tokenized").get<std::vector<std::string>>())
        << source << " case '" << corpus[i].name << "' input " << escape(corpus[i].bytes);
    ++checked;
  }
  return checked;
}

TEST_P(GoldenTest, PreTokenizerPiecesMatchReference) {
  const std::string path = test::tokenizer_fixture_dir(GetParam()) + "/tokenizer.json";
  const nlohmann::json& config = test::fixture_json(GetParam());
  if (!config.at("pre_tokenizer").is_null()) {
    EXPECT_GT(check_pre_tokenizer_pieces(config, goldens().at("cases"), path), 400u);
    return;
  }
  // Without a pre-tokenizer (Llama-2) Hugging Face hands each text to the model whole.
  const auto pre_tokenizer = tok::PreTokenizer::from_json(nullptr, path);
  for (const auto& c : test::golden_corpus()) {
    const std::string text = tok::to_valid_utf8(c.bytes);
    std::vector<std::string> pieces;
    pre_tokenizer.apply(text, pieces);
    EXPECT_EQ(pieces, text.empty() ? std::vector<std::string>{} : std::vector<std::string>{text}) << c.name;
  }
}

// SentencePiece-style files do their word marking in the normalizer (Prepend "▁", Replace " "
// by "▁"), so its output is compared directly.
TEST(SentencePieceGolden, NormalizerOutputMatchesReference) {
  const std::string path = test::tokenizer_fixture_dir("llama2") + "/tokenizer.json";
  const auto normalizer = tok::Normalizer::from_json(test::read_json_file(path).at("normalizer"), path);
  const auto& corpus = test::golden_corpus();
  const auto& cases = test::goldens_for("llama2").at("cases");
  size_t checked = 0;
  for (size_t i = 0; i < corpus.size(); ++i) {
    if (!cases[i].contains("normalized")) continue;
    EXPECT_EQ(normalizer.apply(tok::to_valid_utf8(corpus[i].bytes)),
              cases[i].at("normalized").get<std::string>())
        << "case '" << corpus[i].name << "' input " << escape(corpus[i].bytes);
    ++checked;
  }
  EXPECT_GT(checked, 400u);
}

TEST_P(GoldenTest, VocabSizeCoversTheReferenceVocabulary) {
  EXPECT_EQ(tokenizer().vocab_size(), goldens().at("vocab_size_with_added").get<int32_t>());
}

INSTANTIATE_TEST_SUITE_P(Tokenizers, GoldenTest, ::testing::ValuesIn(test::kGoldenTokenizers),
                         [](const auto& info) {
                           std::string name = info.param;
                           for (char& c : name) {
                             if (c == '-') c = '_';
                           }
                           return name;
                         });

std::string variant_test_name(const ::testing::TestParamInfo<std::string>& info) {
  std::string name = info.param;
  for (char& c : name) {
    if (c == '-') c = '_';
  }
  return name;
}

// Variants: a committed file with pipeline options replaced (prefix space, a normalizer
// Sequence with NFKC, ignore_merges off, Metaspace pre-tokenizers and decoders in each prepend
// scheme, byte fallback off), encoded by the reference with the same replacements.
class VariantGoldenTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    goldens_ =
        test::read_json_file(std::string(MB_TEST_DATA_DIR) + "/tokenizers/variants/" + GetParam() + ".json");
    const std::string base = goldens_.at("base").get<std::string>();
    config_ = test::fixture_json(base);
    for (const auto& [key, value] : goldens_.at("overrides").items()) config_[key] = value;
    for (const auto& [key, value] : goldens_.at("model_overrides").items()) config_["model"][key] = value;
    tokenizer_ = std::make_unique<Tokenizer>(Tokenizer::from_json_string(config_.dump(), GetParam()));
  }

  nlohmann::json goldens_;
  nlohmann::json config_;
  std::unique_ptr<Tokenizer> tokenizer_;
};

TEST_P(VariantGoldenTest, EncodeMatchesReferenceIds) {
  const auto& corpus = test::golden_corpus();
  const auto& cases = goldens_.at("cases");
  ASSERT_EQ(cases.size(), corpus.size());
  size_t failures = 0;
  for (size_t i = 0; i < corpus.size(); ++i) {
    const auto want = cases[i].at("ids").get<std::vector<int32_t>>();
    const auto got = tokenizer_->encode(corpus[i].bytes);
    if (want != got && failures++ < 5) ADD_FAILURE() << describe_mismatch(*tokenizer_, corpus[i], want, got);
  }
  EXPECT_EQ(failures, 0u) << "of " << corpus.size() << " corpus cases";
}

// Variants that replace the pre-tokenizer record its pieces for the hand-written cases.
class VariantPreTokenizerGoldenTest : public VariantGoldenTest {};

TEST_P(VariantPreTokenizerGoldenTest, PreTokenizerPiecesMatchReference) {
  ASSERT_TRUE(goldens_.at("overrides").contains("pre_tokenizer"));
  EXPECT_GT(check_pre_tokenizer_pieces(config_, goldens_.at("cases"), GetParam()), 400u);
}

// Variants that change decoding record the decoded text of the shorter cases and of id
// sequences that are no text's encoding; streaming must give the same text.
class VariantDecodeGoldenTest : public VariantGoldenTest {};

TEST_P(VariantDecodeGoldenTest, DecodeAndStreamingDecodeMatchReferenceText) {
  ASSERT_TRUE(goldens_.contains("decode_cases")) << "no decode goldens for " << GetParam();
  std::vector<std::tuple<std::vector<int32_t>, std::string, std::string>> expected;
  for (const auto& c : goldens_.at("cases")) {
    if (!c.contains("decoded")) continue;
    expected.emplace_back(c.at("ids").get<std::vector<int32_t>>(), c.at("decoded").get<std::string>(),
                          c.at("decoded_skip_special").get<std::string>());
  }
  for (const auto& c : goldens_.at("decode_cases")) {
    expected.emplace_back(c.at("ids").get<std::vector<int32_t>>(), c.at("text").get<std::string>(),
                          c.at("text_skip_special").get<std::string>());
  }
  ASSERT_GT(expected.size(), 500u);
  for (const auto& [ids, text, text_skip_special] : expected) {
    EXPECT_EQ(tokenizer_->decode(ids), text) << "ids " << join_ids(ids);
    EXPECT_EQ(tokenizer_->decode(ids, true), text_skip_special) << "ids " << join_ids(ids);
    for (bool skip_special : {false, true}) {
      StreamDecoder stream(*tokenizer_, skip_special);
      std::string streamed;
      for (int32_t id : ids) streamed += stream.push(id);
      streamed += stream.finish();
      EXPECT_EQ(streamed, skip_special ? text_skip_special : text) << "streamed ids " << join_ids(ids);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Variants, VariantGoldenTest,
    ::testing::Values("gpt2-add-prefix-space", "gpt-neox-20b-nfkc-sequence", "llama3-without-ignore-merges",
                      "llama2-metaspace-first", "llama2-metaspace-first-split", "llama2-metaspace-always",
                      "llama2-metaspace-always-split", "llama2-metaspace-never",
                      "llama2-metaspace-never-split", "llama2-metaspace-add-prefix-space",
                      "llama2-metaspace-decoder-never", "llama2-decoder-metaspace-sequence",
                      "llama2-without-byte-fallback", "llama2-without-byte-fallback-or-fuse-unk"),
    variant_test_name);

INSTANTIATE_TEST_SUITE_P(Variants, VariantPreTokenizerGoldenTest,
                         ::testing::Values("gpt2-add-prefix-space", "llama2-metaspace-first",
                                           "llama2-metaspace-first-split", "llama2-metaspace-always",
                                           "llama2-metaspace-always-split", "llama2-metaspace-never",
                                           "llama2-metaspace-never-split",
                                           "llama2-metaspace-add-prefix-space",
                                           "llama2-metaspace-decoder-never"),
                         variant_test_name);

INSTANTIATE_TEST_SUITE_P(Variants, VariantDecodeGoldenTest,
                         ::testing::Values("llama2-metaspace-add-prefix-space",
                                           "llama2-metaspace-decoder-never",
                                           "llama2-decoder-metaspace-sequence",
                                           "llama2-without-byte-fallback"),
                         variant_test_name);

// The golden corpus is large enough to exercise every pre-tokenizer path, and BPE merges it into
// fewer ids than bytes. (Encoding speed is a benchmark matter, not a unit-test assertion.)
TEST(TokenizerCorpus, TheGptNeoxCorpusIsLargeAndEncodesToFewerIdsThanBytes) {
  const Tokenizer& tokenizer = test::fixture_tokenizer("gpt-neox-20b");
  size_t bytes = 0;
  size_t ids = 0;
  for (const auto& c : test::golden_corpus()) {
    bytes += c.bytes.size();
    ids += tokenizer.encode(c.bytes).size();
  }
  EXPECT_GT(bytes, 90000u);
  EXPECT_GT(ids, 0u);
  EXPECT_LT(ids, bytes);
}

}  // namespace
}  // namespace mb

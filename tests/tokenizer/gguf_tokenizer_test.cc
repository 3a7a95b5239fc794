// SPDX-License-Identifier: MIT
// Tokenizers carried in GGUF metadata (engine/gguf_tokenizer.h): a GGUF file written from a
// fixture's tokenizer.json must encode and decode the whole golden corpus exactly as the
// tokenizer.json does, and malformed or unsupported tokenizer metadata is refused by name.
#include <gtest/gtest.h>

#include <map>
#include <nlohmann/json.hpp>
#include <tuple>

#include "core/error.h"
#include "engine/gguf_tokenizer.h"
#include "io/gguf.h"
#include "io/mapped_file.h"
#include "tokenizer/tokenizer_test_support.h"

namespace mb {
namespace {

// Writes a tensorless GGUF file holding `metadata` and returns its path.
std::string write_metadata_file(const std::vector<std::pair<std::string, GgufValue>>& metadata,
                                const std::string& tag) {
  GgufWriter writer;
  writer.set("general.architecture", GgufValue::string("mamba"));
  for (const auto& [key, value] : metadata) writer.set(key, value);
  const std::string path = test::fresh_temp_dir(tag) + "/tokenizer.gguf";
  writer.write(path);
  return path;
}

std::string fixture_json(const std::string& name) {
  return read_text_file(test::tokenizer_fixture_dir(name) + "/tokenizer.json");
}

class GgufTokenizerGolden : public ::testing::TestWithParam<std::string> {};

TEST_P(GgufTokenizerGolden, EncodesAndDecodesTheCorpusLikeTheTokenizerJson) {
  const Tokenizer& reference = test::fixture_tokenizer(GetParam());
  // Rows past the tokenizer's ids, as a Mamba embedding padded to a multiple of 8 has them.
  const int64_t rows = (reference.vocab_size() + 7) / 8 * 8 + 8;
  const auto metadata = gguf_tokenizer_metadata(fixture_json(GetParam()), rows, 0, GetParam());
  const GgufFile file(write_metadata_file(metadata, "gguf_tok_" + GetParam()));
  EXPECT_EQ(file.find("tokenizer.ggml.tokens")->size(), static_cast<size_t>(rows));
  const std::map<std::string, std::string> pre = {
      {"gpt2", "gpt-2"}, {"gpt-neox-20b", "olmo"}, {"llama3", "llama-bpe"}, {"qwen3", "qwen2"}};
  EXPECT_EQ(*file.string_if_present("tokenizer.ggml.pre"), pre.at(GetParam()));
  const Tokenizer tokenizer = gguf_tokenizer(file);
  EXPECT_EQ(tokenizer.vocab_size(), reference.vocab_size());
  const auto& cases = test::goldens_for(GetParam()).at("cases");
  const auto& corpus = test::golden_corpus();
  ASSERT_EQ(cases.size(), corpus.size());
  size_t failures = 0;
  for (size_t i = 0; i < corpus.size(); ++i) {
    const auto want = cases[i].at("ids").get<std::vector<int32_t>>();
    const auto got = tokenizer.encode(corpus[i].bytes);
    if (want != got && failures++ < 5)
      ADD_FAILURE() << "case '" << corpus[i].name << "': expected " << test::join_ids(want) << ", got "
                    << test::join_ids(got);
    if (want == got) {
      EXPECT_EQ(tokenizer.decode(got), cases[i].at("decoded").get<std::string>()) << corpus[i].name;
      EXPECT_EQ(tokenizer.decode(got, true), cases[i].at("decoded_skip_special").get<std::string>())
          << corpus[i].name;
    }
  }
  EXPECT_EQ(failures, 0u) << "of " << corpus.size() << " corpus cases";
  for (int32_t id = 0; id < reference.vocab_size(); ++id) {
    ASSERT_EQ(tokenizer.id_to_token(id), reference.id_to_token(id)) << id;
    ASSERT_EQ(tokenizer.is_special(id), reference.is_special(id)) << id;
  }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, GgufTokenizerGolden,
                         ::testing::Values("gpt-neox-20b", "gpt2", "llama3", "qwen3"), [](const auto& info) {
                           std::string name = info.param;
                           for (char& ch : name)
                             if (ch == '-') ch = '_';
                           return name;
                         });

TEST(GgufTokenizer, GptNeoxTokenTypesFollowLlamaCppsConverter) {
  const auto metadata = gguf_tokenizer_metadata(fixture_json("gpt-neox-20b"), 50280, 0, "gpt-neox-20b");
  const GgufValue* tokens = nullptr;
  const GgufValue* types = nullptr;
  for (const auto& [key, value] : metadata) {
    if (key == "tokenizer.ggml.tokens") tokens = &value;
    if (key == "tokenizer.ggml.token_type") types = &value;
  }
  ASSERT_TRUE(tokens && types);
  EXPECT_EQ(tokens->strings[0], "<|endoftext|>");
  EXPECT_EQ(types->integers[0], 3);  // control
  EXPECT_EQ(tokens->strings[50276], "  ");
  EXPECT_EQ(types->integers[50276], 4);  // user-defined: an added token that is not special
  EXPECT_EQ(types->integers[510], 1);    // "The"
  EXPECT_EQ(tokens->strings[50277], "[PAD50277]");
  EXPECT_EQ(types->integers[50279], 5);  // unused
}

TEST(GgufTokenizer, UnsupportedOrMalformedMetadataIsRefusedByName) {
  const auto good = gguf_tokenizer_metadata(fixture_json("gpt2"), 50264, 50256, "gpt2");
  const auto with = [&](const std::string& key, std::optional<GgufValue> value) {
    std::vector<std::pair<std::string, GgufValue>> changed;
    for (const auto& [k, v] : good)
      if (k != key) changed.emplace_back(k, v);
    if (value) changed.emplace_back(key, *value);
    return changed;
  };
  std::vector<int64_t> bad_types(50264, 1);
  bad_types[7] = 9;
  std::vector<std::string> duplicated = good[2].second.strings;
  duplicated[300] = duplicated[299];
  const std::vector<std::pair<std::vector<std::pair<std::string, GgufValue>>, std::string>> cases = {
      {with("tokenizer.ggml.model", GgufValue::string("llama")), "'llama' is not supported"},
      {with("tokenizer.ggml.model", std::nullopt), "has no tokenizer"},
      {with("tokenizer.ggml.pre", GgufValue::string("qwen9")), "'qwen9' is not supported"},
      {with("tokenizer.ggml.pre", std::nullopt), "missing required metadata 'tokenizer.ggml.pre'"},
      {with("tokenizer.ggml.tokens", GgufValue::string("x")), "must be an array of strings"},
      {with("tokenizer.ggml.merges", std::nullopt), "'tokenizer.ggml.merges'"},
      {with("tokenizer.ggml.token_type", GgufValue::integer_array(GgufType::Int32, {1, 1})),
       "one entry per token"},
      {with("tokenizer.ggml.token_type", GgufValue::integer_array(GgufType::Int32, bad_types)),
       "unknown token type 9"},
      {with("tokenizer.ggml.tokens", GgufValue::string_array(duplicated)), "are the same string"},
      {with("tokenizer.ggml.merges", GgufValue::string_array({"a b c"})), "merge"},
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    const GgufFile file(write_metadata_file(cases[i].first, "gguf_tok_bad"));
    try {
      gguf_tokenizer(file);
      ADD_FAILURE() << "case " << i << " accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(cases[i].second), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("tokenizer.gguf"), std::string::npos) << e.what();
    }
  }
}

TEST(GgufTokenizer, TokenizersGgufCannotDescribeAreNotWritten) {
  for (const char* name : {"llama2", "gpt4o", "deepseek-v3"}) {
    EXPECT_THROW(gguf_tokenizer_metadata(fixture_json(name), 200000, std::nullopt, name), Error) << name;
  }
  EXPECT_THROW(gguf_tokenizer_metadata(fixture_json("gpt2"), 1000, std::nullopt, "gpt2"),
               Error);  // too few rows
}

// The GPT-2 fixture's vocabulary and merges behind a Split on `regex` followed by ByteLevel
// without a regex: the pipeline of llama.cpp's Llama-3-regex and Tekken pre-tokenizer names.
std::string split_form(std::string_view regex, bool ignore_merges) {
  nlohmann::json root = nlohmann::json::parse(fixture_json("gpt2"));
  const nlohmann::json split = {{"type", "Split"},
                                {"pattern", {{"Regex", std::string(regex)}}},
                                {"behavior", "Isolated"},
                                {"invert", false}};
  const nlohmann::json byte_level = {
      {"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", true}, {"use_regex", false}};
  root["pre_tokenizer"] = {{"type", "Sequence"}, {"pretokenizers", {split, byte_level}}};
  root["model"]["ignore_merges"] = ignore_merges;
  return root.dump();
}

// Mistral's Tekken regex as its tokenizer.json spells it (quoted in llama.cpp's llama-vocab.cpp).
constexpr std::string_view kTekken =
    R"([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr std::string_view kLlama3 =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

TEST(GgufTokenizer, SplitPreTokenizersTravelUnderLlamaCppsNames) {
  // Granite-4.0's files say "dbrx" (Llama-3's regex, no ignore_merges); Nemotron-H's tokenizer
  // is Tekken's.
  const std::vector<std::tuple<std::string_view, bool, std::string>> forms = {
      {kLlama3, true, "llama-bpe"}, {kLlama3, false, "dbrx"}, {kTekken, true, "tekken"}};
  for (const auto& [regex, ignore_merges, name] : forms) {
    SCOPED_TRACE(name);
    const std::string json = split_form(regex, ignore_merges);
    const Tokenizer reference = Tokenizer::from_json_string(json, name);
    const GgufFile file(
        write_metadata_file(gguf_tokenizer_metadata(json, 50264, 50256, name), "gguf_tok_split_" + name));
    EXPECT_EQ(*file.string_if_present("tokenizer.ggml.pre"), name);
    const Tokenizer tokenizer = gguf_tokenizer(file);
    size_t failures = 0;
    for (const auto& text : test::golden_corpus())
      if (tokenizer.encode(text.bytes) != reference.encode(text.bytes) && failures++ < 3)
        ADD_FAILURE() << "case '" << text.name << "' tokenizes differently";
    // The written metadata reads back into the same pipeline: writing it again names it the same.
    const nlohmann::json back = nlohmann::json::parse(gguf_tokenizer_json(file));
    EXPECT_EQ(back["model"]["ignore_merges"], ignore_merges);
    EXPECT_EQ(back["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"], std::string(regex));
  }
  // Tekken's regex without ignore_merges is no pre-tokenizer llama.cpp knows.
  try {
    gguf_tokenizer_metadata(split_form(kTekken, false), 50264, std::nullopt, "tekken-like");
    ADD_FAILURE() << "written";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("no llama.cpp pre-tokenizer"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace mb

// SPDX-License-Identifier: MIT
// Loading: malformed files are refused with a message naming the problem, the vocab.json +
// merges.txt and model-directory loaders agree with tokenizer.json, and the generated tiny
// tokenizer loads and round-trips text.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <thread>

#include "core/error.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/tokenizer_test_support.h"

namespace mb {
namespace {

using nlohmann::json;

// Runs `load` and returns the mb::Error message it throws ("" when nothing is thrown).
template <typename Load>
std::string error_of(Load load) {
  try {
    load();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

std::string load_error(const json& file) {
  return error_of([&] { Tokenizer::from_json_string(file.dump(), "test.json"); });
}

void write_text(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
}

TEST(Loading, RefusesMalformedJson) {
  const std::string message = error_of([] { Tokenizer::from_json_string("{\"model\": {", "broken.json"); });
  EXPECT_NE(message.find("broken.json"), std::string::npos) << message;
  EXPECT_NE(message.find("not valid JSON"), std::string::npos) << message;
  EXPECT_NE(error_of([] { Tokenizer::from_json_string("[1, 2]", "array.json"); }), "");
  EXPECT_NE(error_of([] { Tokenizer::from_json_string("{\"a\": \"\xff\"}", "bad-utf8.json"); }), "");
}

TEST(Loading, RefusesAMissingFileNamingIt) {
  const std::string message = error_of([] { Tokenizer::from_json_file("/nonexistent/tokenizer.json"); });
  EXPECT_NE(message.find("/nonexistent/tokenizer.json"), std::string::npos) << message;
}

TEST(Loading, RefusesAMissingModel) {
  json file = test::tiny_tokenizer_json({});
  file.erase("model");
  EXPECT_NE(load_error(file).find("missing 'model'"), std::string::npos) << load_error(file);
  file["model"] = "BPE";
  EXPECT_NE(load_error(file).find("missing 'model'"), std::string::npos) << load_error(file);
}

TEST(Loading, RefusesUnknownModelTypes) {
  json file = test::tiny_tokenizer_json({});
  file["model"]["type"] = "WordPiece";
  const std::string message = load_error(file);
  EXPECT_NE(message.find("unsupported model type 'WordPiece'"), std::string::npos) << message;
  EXPECT_NE(message.find("test.json"), std::string::npos) << message;
  // SentencePiece's other model kind (T5, ALBERT), which a byte-fallback BPE file is not.
  file["model"] = {{"type", "Unigram"}, {"unk_id", 0}, {"vocab", json::array({json::array({"<unk>", 0.0})})}};
  EXPECT_NE(load_error(file).find("unsupported model type 'Unigram'"), std::string::npos) << load_error(file);
}

TEST(Loading, AcceptsAnUntaggedBpeModel) {
  json file = test::tiny_tokenizer_json({{"a", "b"}});
  file["model"].erase("type");
  EXPECT_EQ(Tokenizer::from_json_string(file.dump()).encode("ab"), std::vector<int32_t>{256});
}

TEST(Loading, RefusesMergesThatReferenceUnknownTokens) {
  json file = test::tiny_tokenizer_json({{"a", "b"}});
  file["model"]["merges"].push_back("ab zzz");
  std::string message = load_error(file);
  EXPECT_NE(message.find("'zzz'"), std::string::npos) << message;
  EXPECT_NE(message.find("merge #1"), std::string::npos) << message;

  file = test::tiny_tokenizer_json({});
  file["model"]["merges"] = json::array({json::array({"a", "b"})});  // "ab" is not in the vocabulary
  message = load_error(file);
  EXPECT_NE(message.find("'ab'"), std::string::npos) << message;
}

TEST(Loading, RefusesMalformedVocabAndMerges) {
  json file = test::tiny_tokenizer_json({});
  file["model"]["vocab"]["a"] = "one";
  EXPECT_NE(load_error(file).find("'a'"), std::string::npos) << load_error(file);
  file = test::tiny_tokenizer_json({});
  file["model"]["vocab"]["a"] = -3;
  EXPECT_NE(load_error(file).find("-3"), std::string::npos) << load_error(file);
  file = test::tiny_tokenizer_json({});
  file["model"]["merges"] = json::array({"a b c"});
  EXPECT_NE(load_error(file).find("'a b c'"), std::string::npos) << load_error(file);
  file["model"]["merges"] = json::array({42});
  EXPECT_NE(load_error(file).find("merge #0"), std::string::npos) << load_error(file);
  file = test::tiny_tokenizer_json({});
  file["model"].erase("vocab");
  EXPECT_NE(load_error(file).find("'vocab'"), std::string::npos) << load_error(file);
  file = test::tiny_tokenizer_json({});
  file["added_tokens"] = json::array({json{{"id", 300}}});
  EXPECT_NE(load_error(file).find("added_tokens[0]"), std::string::npos) << load_error(file);
}

TEST(Loading, RefusesUnsupportedPipelineStages) {
  json file = test::tiny_tokenizer_json({});
  file["normalizer"] = {{"type", "Lowercase"}};
  EXPECT_NE(load_error(file).find("normalizer type 'Lowercase'"), std::string::npos) << load_error(file);

  file = test::tiny_tokenizer_json({});
  file["pre_tokenizer"] = {{"type", "Whitespace"}};
  EXPECT_NE(load_error(file).find("pre_tokenizer type 'Whitespace'"), std::string::npos) << load_error(file);

  // Any Split pattern and behavior loads now (split_test.cc); one that does not compile does not.
  file = test::tiny_tokenizer_json({});
  file["pre_tokenizer"] = {{"type", "Split"}, {"pattern", {{"Regex", "\\d+"}}}, {"behavior", "Removed"}};
  EXPECT_EQ(load_error(file), "");
  file["pre_tokenizer"]["pattern"] = {{"Regex", "\\d+("}};
  EXPECT_NE(load_error(file).find("the regex '\\d+(' does not compile"), std::string::npos)
      << load_error(file);

  file = test::tiny_tokenizer_json({});
  file["decoder"] = {{"type", "WordPiece"}};
  EXPECT_NE(load_error(file).find("decoder type 'WordPiece'"), std::string::npos) << load_error(file);

  // SentencePiece-style stages outside what is supported.
  file = test::tiny_tokenizer_json({});
  file["normalizer"] = {{"type", "Precompiled"}, {"precompiled_charsmap", "AAAA"}};
  EXPECT_NE(load_error(file).find("normalizer type 'Precompiled'"), std::string::npos) << load_error(file);
  file["normalizer"] = {{"type", "Replace"}, {"pattern", {{"Regex", " +"}}}, {"content", "\u2581"}};
  EXPECT_NE(load_error(file).find("Regex patterns are not supported"), std::string::npos) << load_error(file);
  file["normalizer"] = {{"type", "Prepend"}};
  EXPECT_NE(load_error(file).find("'prepend'"), std::string::npos) << load_error(file);

  file = test::tiny_tokenizer_json({});
  file["pre_tokenizer"] = {{"type", "Metaspace"}, {"replacement", "\u2581"}, {"prepend_scheme", "sometimes"}};
  EXPECT_NE(load_error(file).find("prepend_scheme 'sometimes'"), std::string::npos) << load_error(file);
  // As in Hugging Face, add_prefix_space false needs prepend_scheme never.
  file["pre_tokenizer"] = {{"type", "Metaspace"}, {"replacement", "\u2581"}, {"add_prefix_space", false}};
  EXPECT_NE(load_error(file).find("add_prefix_space false"), std::string::npos) << load_error(file);
  file["pre_tokenizer"]["prepend_scheme"] = "never";
  EXPECT_EQ(load_error(file), "");
  file["pre_tokenizer"]["replacement"] = "__";
  EXPECT_NE(load_error(file).find("single character"), std::string::npos) << load_error(file);
}

TEST(Loading, AcceptsBothMergeNotations) {
  json strings = test::tiny_tokenizer_json({{"h", "e"}, {"l", "l"}, {"he", "ll"}});
  json pairs = strings;
  pairs["model"]["merges"] =
      json::array({json::array({"h", "e"}), json::array({"l", "l"}), json::array({"he", "ll"})});
  const auto a = Tokenizer::from_json_string(strings.dump()).encode("hello hell");
  const auto b = Tokenizer::from_json_string(pairs.dump()).encode("hello hell");
  EXPECT_EQ(a, b);
  EXPECT_EQ(a.front(), 258);  // "hell"
}

TEST(Decoding, RefusesIdsWithoutAToken) {
  const Tokenizer& t = test::fixture_tokenizer("gpt-neox-20b");
  for (int32_t id : {-1, 50277, 1 << 30}) {
    const std::vector<int32_t> ids = {100, id};
    const std::string message = error_of([&] { t.decode(ids); });
    EXPECT_NE(message.find(std::to_string(id)), std::string::npos) << message;
    StreamDecoder stream(t);
    EXPECT_NE(error_of([&] { stream.push(id); }), "");
  }
  EXPECT_EQ(t.vocab_size(), 50277);
}

TEST(Loading, VocabAndMergesFilesMatchTheTokenizerJson) {
  const json gpt2 = test::read_json_file(test::tokenizer_fixture_dir("gpt2") + "/tokenizer.json");
  const std::string dir = test::fresh_temp_dir("vocab-merges");
  write_text(dir + "/vocab.json", gpt2.at("model").at("vocab").dump());
  std::string merges = "#version: 0.2\n";
  for (const auto& merge : gpt2.at("model").at("merges")) merges += merge.get<std::string>() + "\n";
  write_text(dir + "/merges.txt", merges);

  const Tokenizer from_files = Tokenizer::from_vocab_merges(dir + "/vocab.json", dir + "/merges.txt");
  const Tokenizer from_dir = Tokenizer::from_model_dir(dir);
  const auto& goldens = test::goldens_for("gpt2").at("cases");
  const auto& corpus = test::golden_corpus();
  for (size_t i = 0; i < corpus.size(); ++i) {
    const auto want = goldens[i].at("ids").get<std::vector<int32_t>>();
    ASSERT_EQ(from_files.encode(corpus[i].bytes), want) << "case " << corpus[i].name;
    ASSERT_EQ(from_dir.encode(corpus[i].bytes), want) << "case " << corpus[i].name;
  }
  EXPECT_EQ(from_files.eos_token_ids(), std::vector<int32_t>{50256});
  EXPECT_EQ(from_files.vocab_size(), 50257);
  std::filesystem::remove_all(dir);
}

TEST(Loading, VocabAndMergesErrorsNameTheFile) {
  const std::string dir = test::fresh_temp_dir("bad-merges");
  write_text(dir + "/vocab.json", R"({"a": 0, "b": 1})");
  write_text(dir + "/merges.txt", "#version: 0.2\na b\n");
  std::string message = error_of([&] { Tokenizer::from_model_dir(dir); });
  EXPECT_NE(message.find("'ab'"), std::string::npos) << message;
  write_text(dir + "/merges.txt", "a\n");
  message = error_of([&] { Tokenizer::from_model_dir(dir); });
  EXPECT_NE(message.find("merges.txt:1"), std::string::npos) << message;
  std::filesystem::remove_all(dir);
}

TEST(Loading, ModelDirPrefersTokenizerJsonAndNamesAnEmptyDir) {
  const Tokenizer t = Tokenizer::from_model_dir(test::tokenizer_fixture_dir("gpt-neox-20b"));
  EXPECT_EQ(t.vocab_size(), 50277);
  const std::string empty = test::fresh_temp_dir("empty-model");
  const std::string message = error_of([&] { Tokenizer::from_model_dir(empty); });
  EXPECT_NE(message.find(empty), std::string::npos) << message;
  std::filesystem::remove_all(empty);
}

TEST(ByteLevelWriter, WritesATokenizerThatLoadsAndRoundTrips) {
  const std::string dir = test::fresh_temp_dir("byte-level");
  for (int32_t max_vocab : {257, 300, 512, 50280}) {
    const std::string path = dir + "/tokenizer-" + std::to_string(max_vocab) + ".json";
    write_byte_level_tokenizer_json(path, max_vocab);
    const Tokenizer t = Tokenizer::from_json_file(path);
    EXPECT_LE(t.vocab_size(), max_vocab);
    EXPECT_GE(t.vocab_size(), 257);
    EXPECT_EQ(t.eos_token_ids(), std::vector<int32_t>{0});
    EXPECT_TRUE(t.is_special(0));
    for (const std::string text :
         {"The quick brown fox jumps over the lazy dog.", "",
          "Grüße, 世界! \xf0\x9f\x91\x8d\n\ttabs  and   spaces 12345", "a<|endoftext|>b"}) {
      EXPECT_EQ(t.decode(t.encode(text)), text) << "max_vocab " << max_vocab;
    }
    const std::string english = "the state of the model is a summary of the text";
    if (max_vocab >= 512) {
      EXPECT_LT(t.encode(english).size(), english.size() / 2);
    }
    EXPECT_EQ(t.encode("a<|endoftext|>b")[1], 0);
  }
  std::filesystem::remove_all(dir);
}

TEST(ByteLevelWriter, RefusesAVocabularyTooSmallForTheBytes) {
  const std::string message = error_of([] { write_byte_level_tokenizer_json("/tmp/unused.json", 100); });
  EXPECT_NE(message.find("100"), std::string::npos) << message;
  EXPECT_NE(error_of([] { write_byte_level_tokenizer_json("/nonexistent-dir/t.json", 1000); }), "");
}

TEST(Concurrency, EncodingFromSeveralThreadsGivesTheSameIds) {
  const Tokenizer& t = test::fixture_tokenizer("llama3");
  const auto& corpus = test::golden_corpus();
  std::vector<std::vector<int32_t>> expected;
  for (const auto& c : corpus) expected.push_back(t.encode(c.bytes));
  std::vector<int> mismatches(4, 0);
  std::vector<std::thread> threads;
  for (int worker = 0; worker < 4; ++worker) {
    threads.emplace_back([&, worker] {
      const Tokenizer copy = t;  // copies share the loaded tables
      for (size_t i = worker; i < corpus.size(); i += 2) {
        if (copy.encode(corpus[i].bytes) != expected[i]) ++mismatches[worker];
      }
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(mismatches, std::vector<int>(4, 0));
}

}  // namespace
}  // namespace mb

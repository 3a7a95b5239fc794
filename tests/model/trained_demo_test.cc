// SPDX-License-Identifier: MIT
// The trained demo model of data/demo-model (made by tools/train_demo/): `run` without -m uses it
// and prints English, and mambacpp computes for it the logits PyTorch computed when it was
// trained. The other tests use make-model's random fixtures; these never pin the demo's text.
#include <gtest/gtest.h>

#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "common/test_util.h"
#include "io/file_io.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"

namespace mb {
namespace {

const std::string kDemoModelDir = std::string(MB_TEST_DATA_DIR) + "/../../data/demo-model";

// The lowercase words (runs of letters) of `text`.
std::vector<std::string> demo_words_of(const std::string& text) {
  std::vector<std::string> words;
  std::string word;
  for (char c : text + " ") {
    if (std::isalpha(static_cast<unsigned char>(c))) {
      word += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    } else if (!word.empty()) {
      words.push_back(word);
      word.clear();
    }
  }
  return words;
}

TEST(DemoModel, RunWithoutModelUsesTheTrainedDemoAndPrintsEnglish) {
  // From a folder without data/demo-model, so the program finds the source tree's copy.
  const std::string dir = test::make_temp_dir("demo_run");
  const std::string command = "cd " + dir + " && " + std::string(MB_CLI_PATH) +
                              " run -p 'And God said' -n 48 --seed 3 -t 1 >out.txt 2>err.txt";
  ASSERT_EQ(std::system(command.c_str()), 0) << read_text_file(dir + "/err.txt");
  EXPECT_FALSE(std::filesystem::exists(dir + "/models")) << "a random demo model was written";
  const std::string text = read_text_file(dir + "/out.txt");
  ASSERT_TRUE(text.starts_with("And God said")) << text;
  // Words of any English text, and of the King James Bible in particular: a random model's
  // output (byte soup) holds almost none of them.
  const std::set<std::string> common = {
      "the",   "and",  "of",   "to",  "in",   "that", "he",  "shall", "unto", "his",  "i",   "a",
      "for",   "they", "be",   "is",  "him",  "them", "not", "with",  "all",  "thou", "thy", "was",
      "which", "my",   "lord", "god", "said", "ye",   "me",  "were",  "upon", "have", "it",  "thee"};
  const std::vector<std::string> words = demo_words_of(text.substr(12));
  std::set<std::string> found;
  size_t common_count = 0;
  for (const std::string& word : words) {
    if (common.contains(word)) {
      found.insert(word);
      ++common_count;
    }
  }
  EXPECT_GE(found.size(), 5u) << text;
  EXPECT_GE(common_count * 4, words.size()) << "fewer than a quarter of the words are common ones: " << text;
}

TEST(DemoModel, LogitsEqualPyTorchs) {
  // The reference: the trained model's last-position logits for a prompt, computed by
  // tools/train_demo/train_demo.py in PyTorch from the same bf16 weights.
  const nlohmann::json reference = nlohmann::json::parse(test::read_data_file("demo_model/reference.json"));
  const std::vector<int32_t> tokens = reference.at("tokens").get<std::vector<int32_t>>();
  const std::vector<float> want = reference.at("last_logits").get<std::vector<float>>();
  // The training script's tokenizer and mambacpp's agree on the prompt.
  EXPECT_EQ(Tokenizer::from_model_dir(kDemoModelDir).encode(reference.at("prompt").get<std::string>()),
            tokens);

  const auto model = Model::load(kDemoModelDir);
  ASSERT_EQ(static_cast<size_t>(model->config().vocab_size), want.size());
  SequenceState state = model->new_state();
  const SequenceInput input{&state, tokens, {}};
  Workspace ws;
  std::vector<std::vector<float>> out;
  model->forward(ComputeContext{1}, std::span(&input, 1), {OutputKind::LogitsLast, 0}, ws, out);
  ASSERT_EQ(out.size(), 1u);
  // f32 arithmetic in another order (PyTorch's chunked scan, its GEMMs) differs in the last bits
  // only: the logits span tens of units.
  EXPECT_LT(test::max_abs_diff(out[0], want), 2e-3);
}

}  // namespace
}  // namespace mb

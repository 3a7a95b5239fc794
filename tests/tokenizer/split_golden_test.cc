// SPDX-License-Identifier: MIT
// Goldens of Hugging Face's tokenizers (tools/tokenizer_goldens/generate_splits.js) for the
// Oniguruma-backed Split pre-tokenizer: the pieces of Regex and String patterns in every
// behavior, inverted and not; and the ids and pieces of every committed tokenizer on the
// Unicode edge cases (combining marks, emoji ZWJ sequences, CJK, numbers of many scripts, \r\n
// runs, apostrophes, the letter categories of the GPT-4o pattern).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tokenizer/pipeline.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/tokenizer_test_support.h"
#include "tokenizer/utf8.h"

namespace mb {
namespace {

using nlohmann::json;
using test::escape;

const json& split_goldens() {
  static const json goldens =
      test::read_json_file(std::string(MB_TEST_DATA_DIR) + "/tokenizers/split_behaviors.json");
  return goldens;
}

// The byte offset of every code point of `text`, plus its length: the goldens give pieces as
// code point offsets, as the reference reports them.
std::vector<size_t> code_point_offsets(const std::string& text) {
  std::vector<size_t> offsets;
  size_t pos = 0;
  while (pos < text.size()) {
    offsets.push_back(pos);
    tok::next_code_point(text, pos);
  }
  offsets.push_back(text.size());
  return offsets;
}

TEST(SplitGoldens, EveryBehaviorAndInvertMatchesTheReference) {
  const auto& goldens = split_goldens();
  const auto texts = goldens.at("texts").get<std::vector<std::string>>();
  size_t checked = 0;
  for (const auto& config : goldens.at("configs")) {
    const json& pre_tokenizer = config.at("pre_tokenizer");
    const auto split = tok::PreTokenizer::from_json(pre_tokenizer, "split_behaviors.json");
    const auto& spans = config.at("spans");
    ASSERT_EQ(spans.size(), texts.size());
    size_t failures = 0;
    for (size_t i = 0; i < texts.size(); ++i) {
      const auto offsets = code_point_offsets(texts[i]);
      const auto flat = spans[i].get<std::vector<size_t>>();
      std::vector<std::string> want;
      for (size_t k = 0; k + 1 < flat.size(); k += 2) {
        want.push_back(texts[i].substr(offsets[flat[k]], offsets[flat[k + 1]] - offsets[flat[k]]));
      }
      std::vector<std::string> got;
      split.apply(texts[i], got);
      if (got != want && failures++ < 3) {
        std::string listing;
        for (const auto& piece : got) listing += " " + escape(piece);
        ADD_FAILURE() << pre_tokenizer.dump() << " on " << escape(texts[i]) << ": got" << listing;
      }
      ++checked;
    }
    EXPECT_EQ(failures, 0u) << pre_tokenizer.dump();
  }
  EXPECT_EQ(checked, 180u * texts.size());
}

class EdgeGoldenTest : public ::testing::TestWithParam<std::string> {};

TEST_P(EdgeGoldenTest, EncodeAndPiecesMatchTheReference) {
  const std::string dir = test::tokenizer_fixture_dir(GetParam());
  const json goldens = test::read_json_file(dir + "/edge_goldens.json");
  const json edges = test::read_json_file(std::string(MB_TEST_DATA_DIR) + "/tokenizers/edge_cases.json");
  const json& config = test::fixture_json(GetParam());
  const Tokenizer& tokenizer = test::fixture_tokenizer(GetParam());
  const auto pre_tokenizer = tok::PreTokenizer::from_json(config.at("pre_tokenizer"), dir);
  const auto& cases = goldens.at("cases");
  ASSERT_EQ(cases.size(), edges.at("cases").size());
  for (size_t i = 0; i < cases.size(); ++i) {
    const std::string text = edges.at("cases")[i].at("text").get<std::string>();
    ASSERT_EQ(cases[i].at("name"), edges.at("cases")[i].at("name"));
    EXPECT_EQ(test::join_ids(tokenizer.encode(text)),
              test::join_ids(cases[i].at("ids").get<std::vector<int32_t>>()))
        << GetParam() << " case '" << cases[i].at("name").get<std::string>() << "' input " << escape(text);
    if (!cases[i].contains("pre_tokenized")) continue;
    std::vector<std::string> pieces;
    pre_tokenizer.apply(text, pieces);
    EXPECT_EQ(pieces, cases[i].at("pre_tokenized").get<std::vector<std::string>>())
        << GetParam() << " case '" << cases[i].at("name").get<std::string>() << "'";
  }
}

INSTANTIATE_TEST_SUITE_P(Tokenizers, EdgeGoldenTest, ::testing::ValuesIn(test::kGoldenTokenizers),
                         [](const auto& info) {
                           std::string name = info.param;
                           for (char& c : name) {
                             if (c == '-') c = '_';
                           }
                           return name;
                         });

}  // namespace
}  // namespace mb

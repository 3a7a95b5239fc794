// SPDX-License-Identifier: MIT
// OutputKind::ArgmaxLast on the CPU: the greedy index of each sequence's LogitsLast row, and
// greedy_index's rule (the lowest index of the largest value, NaNs skipped), which the Vulkan
// shader follows too.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "common/model_fixture.h"
#include "common/test_util.h"
#include "ops/argmax.h"

namespace mb {
namespace {

TEST(GreedyIndex, LowestIndexOfTheLargestValueSkippingNaNs) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  EXPECT_EQ(greedy_index(std::vector<float>{1, 3, 3, 2}.data(), 4), 1);
  EXPECT_EQ(greedy_index(std::vector<float>{nan, -5, nan, -4}.data(), 4), 3);
  EXPECT_EQ(greedy_index(std::vector<float>{nan, nan}.data(), 2), 0);
  EXPECT_EQ(greedy_index(std::vector<float>{-0.0f, 0.0f}.data(), 2), 0);
  EXPECT_EQ(greedy_index(std::vector<float>{-INFINITY, -INFINITY}.data(), 2), 0);
  // Without NaNs it is std::max_element's index.
  for (uint64_t seed = 0; seed < 20; ++seed) {
    std::vector<float> row = test::random_floats(301, seed);
    for (float& v : row) v = std::round(v * 4.0f);  // many ties
    EXPECT_EQ(greedy_index(row.data(), 301), std::max_element(row.begin(), row.end()) - row.begin());
  }
}

TEST(ArgmaxOutput, IsTheGreedyIndexOfTheLastLogits) {
  MakeModelOptions options;
  options.config = test::small_config(32, 2, 97);
  const auto model = Model::load(test::write_model(options, "argmax_output"));
  const std::vector<std::vector<int32_t>> prompts = {test::random_tokens(3, 97, 1),
                                                     test::random_tokens(7, 97, 2)};
  std::vector<std::vector<float>> logits, ids;
  for (OutputKind kind : {OutputKind::LogitsLast, OutputKind::ArgmaxLast}) {
    std::vector<SequenceState> states = {model->new_state(), model->new_state()};
    const SequenceInput batch[] = {{&states[0], prompts[0], {}}, {&states[1], prompts[1], {}}};
    Workspace ws;
    model->forward(ComputeContext{1}, batch, {kind, 2}, ws, kind == OutputKind::LogitsLast ? logits : ids);
  }
  ASSERT_EQ(ids.size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    ASSERT_EQ(ids[i].size(), 1u);
    EXPECT_EQ(ids[i][0], static_cast<float>(greedy_index(logits[i].data(), 97)));
  }
  EXPECT_EQ(model->output_width(OutputKind::ArgmaxLast), 1);
}

}  // namespace
}  // namespace mb

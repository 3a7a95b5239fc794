// SPDX-License-Identifier: MIT
// Model::forward refuses requests it cannot run safely, before touching any state: a thread
// count outside [1, kMaxThreads] (OpenMP would crash creating the threads) and a batch that names
// one SequenceState twice (two sequences would advance it at once, racing under threads).
#include <gtest/gtest.h>

#include "common/model_fixture.h"
#include "common/test_util.h"
#include "core/error.h"

namespace mb {
namespace {

using test::same_bits;

const Model& small_model() {
  static const std::unique_ptr<Model> model = [] {
    MakeModelOptions o;
    o.config = test::small_config(32, 2, 97);
    o.seed = 5;
    return Model::load(test::write_model(o, "forward_validation"));
  }();
  return *model;
}

// Runs `batch` and returns the message of the mb::Error it throws ("" when it throws none).
std::string forward_error(const ComputeContext& ctx, std::span<const SequenceInput> batch) {
  Workspace ws;
  std::vector<std::vector<float>> out;
  try {
    small_model().forward(ctx, batch, {OutputKind::LogitsLast, 0}, ws, out);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(ForwardValidation, ThreadCountsOutsideTheSupportedRangeAreRefused) {
  const Model& model = small_model();
  SequenceState state = model.new_state();
  const SequenceState before = state;
  const std::vector<int32_t> tokens = {1, 2, 3};
  const SequenceInput input{&state, tokens, {}};
  for (int threads : {0, -1, kMaxThreads + 1, 100000}) {
    const std::string message = forward_error(ComputeContext{threads, best_isa()}, std::span(&input, 1));
    EXPECT_NE(message.find("n_threads must be in [1, " + std::to_string(kMaxThreads) + "], got " +
                           std::to_string(threads)),
              std::string::npos)
        << threads << ": " << message;
  }
  EXPECT_TRUE(same_bits(state.download(), before.download()));
  EXPECT_EQ(state.position, 0);
  // The bounds themselves are allowed (checked without starting 1024 threads).
  EXPECT_NO_THROW(check_thread_count(1));
  EXPECT_NO_THROW(check_thread_count(kMaxThreads));
  EXPECT_EQ(forward_error(ComputeContext{2, best_isa()}, std::span(&input, 1)), "");
  EXPECT_EQ(state.position, 3);
}

TEST(ForwardValidation, OneStateTwiceInABatchIsRefusedBeforeAnyStateChanges) {
  const Model& model = small_model();
  // Give the states some history first, so "unchanged" compares real values, not zeros.
  std::vector<SequenceState> states(2, model.new_state());
  const auto warm = test::random_tokens(6, model.config().vocab_size, 3);
  for (SequenceState& s : states) {
    const SequenceInput input{&s, warm, {}};
    ASSERT_EQ(forward_error(ComputeContext{1, best_isa()}, std::span(&input, 1)), "");
  }
  const std::vector<SequenceState> before = states;
  const auto a = test::random_tokens(9, model.config().vocab_size, 4);
  const auto b = test::random_tokens(5, model.config().vocab_size, 5);
  const auto c = test::random_tokens(7, model.config().vocab_size, 6);
  // Two threads, so that without the check the two sequences would really race on states[0].
  const std::vector<SequenceInput> batch = {{&states[0], a, {}}, {&states[1], b, {}}, {&states[0], c, {}}};
  const std::string message = forward_error(ComputeContext{2, best_isa()}, batch);
  EXPECT_NE(message.find("sequences 0 and 2 of the batch share one SequenceState"), std::string::npos)
      << message;
  for (size_t i = 0; i < states.size(); ++i) {
    EXPECT_TRUE(same_bits(states[i].download(), before[i].download())) << "state " << i;
    EXPECT_EQ(states[i].position, before[i].position) << "state " << i;
  }
}

TEST(ForwardValidation, AStateOfAnotherLayoutIsRefusedNamingThePartsExpected) {
  const Model& model = small_model();
  const ModelConfig& c = model.config();
  // The Mamba-1 layout: per layer, the conv history and then the SSM state.
  const StateLayout& layout = model.state_layout();
  ASSERT_EQ(layout.n_layers(), c.n_layer);
  const LayerStateLayout& layer = layout.layer(1);
  ASSERT_EQ(layer.parts.size(), 2u);
  EXPECT_EQ(layer.parts[0].name, "conv");
  EXPECT_EQ(layer.parts[0].shape, (std::vector<int64_t>{c.ssm.d_conv - 1, c.ssm.d_inner}));
  EXPECT_EQ(layer.parts[1].name, "ssm");
  EXPECT_EQ(layer.parts[1].shape, (std::vector<int64_t>{c.ssm.d_state, c.ssm.d_inner}));
  EXPECT_EQ(layer.offset, layout.layer(0).floats);
  EXPECT_EQ(layer.parts[1].offset, layer.offset + (c.ssm.d_conv - 1) * c.ssm.d_inner);
  EXPECT_EQ(model.state_floats(), static_cast<size_t>(c.n_layer * (c.ssm.d_conv - 1 + c.ssm.d_state) * c.ssm.d_inner));

  SequenceState state(std::vector<float>(model.state_floats() - 1, 0.5f), 0);
  const SequenceState before = state;
  const std::vector<int32_t> tokens = {1, 2};
  const SequenceInput input{&state, tokens, {}};
  const std::string message = forward_error(ComputeContext{1, best_isa()}, std::span(&input, 1));
  const std::string expected_parts = "conv [" + std::to_string(c.ssm.d_conv - 1) + ", " +
                                     std::to_string(c.ssm.d_inner) + "] + ssm [" + std::to_string(c.ssm.d_state) +
                                     ", " + std::to_string(c.ssm.d_inner) + "]";
  EXPECT_NE(message.find("sequence 0's state holds " + std::to_string(model.state_floats() - 1)),
            std::string::npos)
      << message;
  EXPECT_NE(message.find(expected_parts), std::string::npos) << message;
  EXPECT_TRUE(same_bits(state.download(), before.download()));
  EXPECT_EQ(state.position, 0);
}

}  // namespace
}  // namespace mb

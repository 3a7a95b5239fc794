// SPDX-License-Identifier: MIT
// The bitwise contract for the hybrid models (Mamba-2, attention and MLP blocks): a prefill of T
// positions equals T decode steps (the logits at every position and the whole final state, its KV
// parts included), for any thread count, round size (the KV handoff between rounds), instruction
// set and batch composition; a state holds the positions it used, continues exactly after a fork
// or a round trip through its host form, and its state and slot files hold those positions only.
// Every comparison is memcmp.
#include <gtest/gtest.h>

#include <filesystem>
#include <map>

#include "common/hybrid_configs.h"
#include "common/model_fixture.h"
#include "common/test_util.h"
#include "engine/slot_file.h"
#include "engine/state_file.h"

namespace mb {
namespace {

using test::same_bits;

struct HybridShape {
  std::string name;
  MakeModelOptions options;
  std::optional<DType> load_dtype;
  int64_t max_length;  // prefill == decode is checked for every T up to this
};

// Granite with attention first and last, in f32; Nemotron-H with a single KV head of 8 channels
// and ReLU^2 MLPs, stored in bf16; Granite quantized to Q8_0 at load (sizes multiples of 32);
// Granite with RoPE: all attention (the granite-4.0-micro form) with heads of 10 channels (less
// than a vector, half of them 5), and mixed with Mamba layers at base 1e4 in bf16.
std::vector<HybridShape> hybrid_shapes() {
  MakeModelOptions a;
  a.config = test::granite_config("*MM*");
  a.seed = 21;
  MakeModelOptions b;
  b.config = test::nemotron_config("M-*M-*");
  b.dtype = DType::BF16;
  b.seed = 22;
  MakeModelOptions c;
  c.config = test::granite_config("M*", 64);
  c.config.hybrid.mlp.width = 64;
  c.seed = 23;
  MakeModelOptions d;
  d.config = test::granite_rope_config("***", 1e7, 40);
  d.seed = 24;
  MakeModelOptions e;
  e.config = test::granite_rope_config("M*M*", 1e4, 48);
  e.dtype = DType::BF16;
  e.seed = 25;
  return {{"granite_f32", a, std::nullopt, 300},
          {"nemotron_bf16", b, std::nullopt, 300},
          {"granite_q8_0", c, DType::Q8_0, 100},
          {"granite_rope_all_attention", d, std::nullopt, 300},
          {"granite_rope_mixed_bf16", e, std::nullopt, 100}};
}

const Model& hybrid_model_for(const HybridShape& shape) {
  static std::map<std::string, std::unique_ptr<Model>> models;
  auto it = models.find(shape.name);
  if (it == models.end()) {
    LoadOptions load;
    load.weight_dtype = shape.load_dtype;
    it = models.emplace(shape.name, Model::load(test::write_model(shape.options, "hybrid"), load)).first;
  }
  return *it->second;
}

class HybridExactness : public ::testing::TestWithParam<HybridShape> {};

TEST_P(HybridExactness, PrefillEqualsDecodeStepsForEveryLength) {
  test::expect_prefill_equals_steps_for_every_length(hybrid_model_for(GetParam()), GetParam().max_length);
}

TEST_P(HybridExactness, ThreadCountsRoundSizesAndInstructionSetsChangeNoBit) {
  const Model& model = hybrid_model_for(GetParam());
  // Rounds of 1, 7 and 64 positions hand the KV cache over between rounds at every kind of
  // boundary (inside and across its allocation blocks of positions).
  test::expect_threads_rounds_and_isas_change_no_bit(
      model, test::random_tokens(150, model.config().vocab_size, 4), {0, 1, 7, 64});
}

TEST_P(HybridExactness, EachSequenceOfABatchEqualsItAlone) {
  const Model& model = hybrid_model_for(GetParam());
  const std::vector<size_t> lengths = {1, 5, 17, 70, 3, 140};
  std::vector<std::vector<int32_t>> prompts;
  for (size_t i = 0; i < lengths.size(); ++i)
    prompts.push_back(test::random_tokens(lengths[i], model.config().vocab_size, 20 + i));
  test::expect_batch_equals_each_alone(
      model, prompts, {OutputKind::LogitsLast, OutputKind::LogitsAll, OutputKind::HiddenMean}, {0, 4});
  test::expect_batched_steps_equal_solo(model, ComputeContext{2, best_isa()}, prompts.size(), 12);
}

TEST_P(HybridExactness, PrefillThenDecodeContinuesLikeDecodeAllTheWay) {
  test::expect_prefill_then_decode_equals_decode(hybrid_model_for(GetParam()), ComputeContext{2, best_isa()},
                                                 {OutputKind::None, 8});
}

TEST_P(HybridExactness, AStateHoldsThePositionsItUsedAndContinuesExactlyAfterAForkOrARestore) {
  const Model& model = hybrid_model_for(GetParam());
  const ComputeContext ctx{2, best_isa()};
  const auto tokens = test::random_tokens(60, model.config().vocab_size, 7);
  const std::vector<int32_t> first(tokens.begin(), tokens.begin() + 37),
      rest(tokens.begin() + 37, tokens.end());
  SequenceState state = model.new_state();
  test::prefill(model, ctx, first, state, {OutputKind::None, 0});

  // Fixed parts, then 37 positions of each attention block's keys and values.
  const StateShape shape = model.state_layout().shape();
  const int64_t attention_layers = static_cast<int64_t>(
      std::count(model.config().hybrid.pattern.begin(), model.config().hybrid.pattern.end(), '*'));
  const int64_t kv = model.config().hybrid.attention.n_kv_heads * model.config().hybrid.attention.head_dim;
  ASSERT_EQ(shape.growing.size(), static_cast<size_t>(2 * attention_layers));
  for (int64_t per_position : shape.growing) EXPECT_EQ(per_position, kv);
  EXPECT_EQ(state.floats(), static_cast<size_t>(shape.fixed_floats + 37 * 2 * attention_layers * kv));

  SequenceState fork = state;
  SequenceState restored = model.state_from_host(state.download(), state.position, "the saved state");
  const auto expected = test::step_logits(model, ctx, rest, state);
  EXPECT_TRUE(same_bits(test::step_logits(model, ctx, rest, fork), expected));
  EXPECT_TRUE(same_bits(test::step_logits(model, ctx, rest, restored), expected));
  EXPECT_TRUE(same_bits(fork.download(), state.download()));
  EXPECT_TRUE(same_bits(restored.download(), state.download()));
  EXPECT_EQ(state.floats(), static_cast<size_t>(shape.fixed_floats + 60 * 2 * attention_layers * kv));

  // A state file and a slot file hold those positions only, and restore the same bits.
  const std::string dir = test::make_temp_dir("hybrid_state_files");
  save_state(dir + "/a.state", model, state);
  EXPECT_EQ(std::filesystem::file_size(dir + "/a.state"), 40 + state.floats() * sizeof(float) + 8);
  const SequenceState loaded = load_state(dir + "/a.state", model);
  EXPECT_EQ(loaded.position, 60);
  EXPECT_TRUE(same_bits(loaded.download(), state.download()));
  save_slot_file(dir + "/a.slot", model, tokens, state);
  const SlotFile slot = load_slot_file(dir + "/a.slot", model);
  EXPECT_EQ(slot.tokens, tokens);
  EXPECT_TRUE(same_bits(slot.state.download(), state.download()));
}

INSTANTIATE_TEST_SUITE_P(Shapes, HybridExactness, ::testing::ValuesIn(hybrid_shapes()),
                         [](const auto& info) { return info.param.name; });

}  // namespace
}  // namespace mb

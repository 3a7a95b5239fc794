// SPDX-License-Identifier: MIT
// The bitwise contract for the models with a sequential and a chunked (SSD) form, Mamba-2 and
// Mamba-3: the sequential prefill of T positions equals T decode steps (logits at every position
// and every final state), for any thread count, round size, instruction set and batch
// composition. The chunked form has the same invariances among its own runs (threads,
// instruction sets, batch). Every comparison is memcmp.
#include <gtest/gtest.h>

#include <map>

#include "backends/cpu/cpu_backend.h"
#include "common/mamba2_reference.h"
#include "common/mamba3_reference.h"
#include "common/model_fixture.h"
#include "common/test_util.h"
#include "model/blocks/mamba3_block.h"

namespace mb {
namespace {

using test::same_bits;

// Mamba-3: full vectors with the SiLU gate, and partial vectors (headdim 24, d_state 20), groups
// and the gated norm, stored in bf16. Mamba-2: groups with full vectors in f32, partial vectors
// (headdim 24, d_state 20) with biases in bf16, and one head group of 32 channels in f16.
struct SsdShape {
  std::string name;
  MakeModelOptions options;
  int64_t max_length;  // prefill == decode is checked for every T up to this
};

std::vector<SsdShape> ssd_shapes() {
  MakeModelOptions a;
  a.config = test::mamba3_config(64, 32, 32, 131);
  a.seed = 11;
  MakeModelOptions b;
  b.config = test::mamba3_config(72, 20, 24, 131);
  b.config.ssm.ngroups = 2;
  b.config.ssm.rope_fraction = 1.0;
  b.config.ssm.is_outproj_norm = true;
  b.dtype = DType::BF16;
  b.seed = 12;
  MakeModelOptions c;
  c.config = test::mamba2_config(64, 16, 16, 2, 131);
  c.seed = 13;
  MakeModelOptions d;
  d.config = test::mamba2_config(48, 20, 24, 2, 131);
  d.config.ssm.use_bias = true;
  d.dtype = DType::BF16;
  d.seed = 14;
  MakeModelOptions e;
  e.config = test::mamba2_config(32, 64, 32, 1, 131);
  e.dtype = DType::F16;
  e.seed = 15;
  return {{"mamba3_silu_full_vectors", a, 70},
          {"mamba3_norm_partial_vectors_bf16", b, 70},
          {"mamba2_groups_f32", c, 300},
          {"mamba2_partial_vectors_bias_bf16", d, 300},
          {"mamba2_one_group_f16", e, 300}};
}

const Model& ssd_model_for(const SsdShape& shape) {
  static std::map<std::string, std::unique_ptr<Model>> models;
  auto it = models.find(shape.name);
  if (it == models.end())
    it = models.emplace(shape.name, Model::load(test::write_model(shape.options, "m3exact"))).first;
  return *it->second;
}

class SsdModelExactness : public ::testing::TestWithParam<SsdShape> {};

TEST_P(SsdModelExactness, SequentialPrefillEqualsDecodeStepsForEveryLength) {
  test::expect_prefill_equals_steps_for_every_length(ssd_model_for(GetParam()), GetParam().max_length);
}

TEST_P(SsdModelExactness, ThreadCountsRoundSizesAndInstructionSetsChangeNoBit) {
  const Model& model = ssd_model_for(GetParam());
  const auto tokens = test::random_tokens(150, model.config().vocab_size, 4);
  // Round sizes split the chunked form into continued windows, which differ in rounding, so only
  // the sequential order is round-size invariant.
  test::expect_threads_rounds_and_isas_change_no_bit(model, tokens, {0, 1, 7, 64, 150}, ScanForm::Sequential);
  test::expect_threads_rounds_and_isas_change_no_bit(model, tokens, {0}, ScanForm::Chunked);
}

TEST_P(SsdModelExactness, EachSequenceOfABatchEqualsItAlone) {
  const Model& model = ssd_model_for(GetParam());
  const std::vector<size_t> lengths = {1, 5, 17, 70, 3, 140};
  std::vector<std::vector<int32_t>> prompts;
  for (size_t i = 0; i < lengths.size(); ++i)
    prompts.push_back(test::random_tokens(lengths[i], model.config().vocab_size, 20 + i));
  // Auto picks per sequence by its own length, so a batch mixes the two orders.
  for (ScanForm scan : {ScanForm::Sequential, ScanForm::Chunked, ScanForm::Auto})
    test::expect_batch_equals_each_alone(
        model, prompts, {OutputKind::LogitsLast, OutputKind::LogitsAll, OutputKind::HiddenMean}, {0, 4}, scan,
        16);
  // Then decode steps as a batch (different tokens each step) against each sequence alone.
  test::expect_batched_steps_equal_solo(model, ComputeContext{2, best_isa()}, prompts.size(), 12);
}

TEST_P(SsdModelExactness, PrefillThenDecodeContinuesLikeDecodeAllTheWay) {
  test::expect_prefill_then_decode_equals_decode(ssd_model_for(GetParam()), ComputeContext{2, best_isa()},
                                                 {OutputKind::None, 8, ScanForm::Sequential});
}

void expect_fresh_state_reproduces_mamba3(const Model& model) {
  const ComputeContext ctx{2, best_isa()};
  const auto tokens = test::random_tokens(12, model.config().vocab_size, 6);
  SequenceState first = model.new_state();
  const auto a = test::step_logits(model, ctx, tokens, first);
  SequenceState second = model.new_state();
  const auto b = test::step_logits(model, ctx, tokens, second);
  EXPECT_TRUE(same_bits(a, b));
  EXPECT_TRUE(same_bits(first.download(), second.download()));
  // The state moved away from zero in all four parts of the model's layout (which names them
  // at the offsets the scan op uses), and the angles stayed in [0, 2 pi].
  const auto& m3 = dynamic_cast<const Mamba3Block&>(*model.blocks()[0]);
  const Mamba3StateLayout op_layout = mamba3_state_layout(m3.params());
  const std::vector<float> values = first.download();
  const StateLayout& layout = model.state_layout();
  ASSERT_EQ(layout.n_layers(), model.config().n_layer);
  for (int64_t l = 0; l < model.config().n_layer; ++l) {
    const LayerStateLayout& layer = layout.layer(l);
    ASSERT_EQ(layer.parts.size(), 4u);
    EXPECT_EQ(layer.floats, op_layout.total);
    for (const StatePart& part : layer.parts) {
      const float* begin = values.data() + part.offset;
      EXPECT_GT(test::max_abs(std::vector<float>(begin, begin + part.floats())), 0.0)
          << "layer " << l << " part " << part.name;
    }
    const StatePart& angles = layer.parts[layout.part_index(l, "angles")];
    EXPECT_EQ(angles.offset - layer.offset, op_layout.angle);
    for (int64_t i = 0; i < angles.floats(); ++i) {
      EXPECT_GE(values[angles.offset + i], 0.0f);
      EXPECT_LE(values[angles.offset + i], 6.2831855f);
    }
  }
}

TEST(Mamba3Exactness, AFreshStateReproducesTheSameLogitsAndMovesEveryStatePart) {
  for (const SsdShape& shape : ssd_shapes()) {
    if (shape.options.config.arch != Architecture::Mamba3) continue;
    SCOPED_TRACE(shape.name);
    expect_fresh_state_reproduces_mamba3(ssd_model_for(shape));
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, SsdModelExactness, ::testing::ValuesIn(ssd_shapes()),
                         [](const auto& info) { return info.param.name; });

}  // namespace
}  // namespace mb

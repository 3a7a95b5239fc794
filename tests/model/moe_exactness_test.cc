// SPDX-License-Identifier: MIT
// The bitwise contract for the hybrids with mixture-of-experts layers (Granite-4.0-H's MoE layers,
// Nemotron-H's 'E' layers): a prefill of T positions equals T decode steps (logits at every
// position and the whole final state, KV parts included), for any thread count, round size,
// instruction set and batch composition, with float and quantized experts, top-k from 1 to 6,
// and router scores tied on purpose. A row's experts are computed over the rows routed to each of
// them, so these hold only if the rows an expert happens to share change no bit. And a decode
// step reads only the experts its rows choose. Every comparison is memcmp.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <map>

#include "common/hybrid_configs.h"
#include "common/model_fixture.h"
#include "common/test_util.h"
#include "model/blocks/block.h"

namespace mb {
namespace {

using test::same_bits;

struct MoeShape {
  std::string name;
  MakeModelOptions options;
  std::optional<DType> load_dtype;
  int64_t max_length;  // prefill == decode is checked for every T up to this
  std::function<void(const std::string& dir)> edit = nullptr;
};

// Each router's experts 1 and 3 get the same row (made the largest), so their scores tie in every
// position: the lower index must come first whichever rows share the round.
void tie_experts_1_and_3(const std::string& dir) {
  test::edit_tensors(dir, [](const std::string& name, std::vector<float>& w) {
    if (name.find("router.layer.weight") == std::string::npos && !name.ends_with("mixer.gate.weight")) return;
    const size_t d = w.size() / 7;
    for (size_t c = 0; c < d; ++c) w[3 * d + c] = w[d + c] = 3.0f * w[d + c];
  });
}

// Granite with attention first and last in f32; Nemotron-H in bf16; Granite with top-1 routing,
// quantized to Q8_0 at load; Nemotron-H choosing 6 of 8 experts, quantized to Q4_0, and with
// experts 256 wide, quantized to Q4_K; Granite with tied router scores; Nemotron-3-Super's latent
// experts in f32 and quantized to Q8_0.
std::vector<MoeShape> moe_shapes() {
  MakeModelOptions a;
  a.config = test::granite_moe_config("*MM*");
  a.seed = 31;
  MakeModelOptions b;
  b.config = test::nemotron_moe_config("ME*E-M");
  b.dtype = DType::BF16;
  b.seed = 32;
  MakeModelOptions c;
  c.config = test::granite_moe_config("M*", 5, 1, 32, 64);
  c.config.hybrid.mlp.width = 64;
  c.seed = 33;
  MakeModelOptions d;
  d.config = test::nemotron_moe_config("E*M", 8, 6, 32, 64);
  d.config.hybrid.moe.shared_width = 64;
  d.seed = 34;
  MakeModelOptions e;
  e.config = test::granite_moe_config("M*M", 7, 2);
  e.seed = 35;
  MakeModelOptions f;
  f.config = test::nemotron_moe_config("E*", 4, 2, 256, 256);
  f.config.hybrid.moe.shared_width = 256;
  f.seed = 37;
  MakeModelOptions g;
  g.config = test::nemotron_latent_config("ME*E", 24);
  g.seed = 38;
  MakeModelOptions h;
  h.config = test::nemotron_latent_config("E*", 64, 6, 2, 64);
  h.config.hybrid.moe.shared_width = 64;
  h.seed = 39;
  return {{"granite_moe_f32", a, std::nullopt, 300},
          {"nemotron_moe_bf16", b, std::nullopt, 300},
          {"granite_moe_top1_q8_0", c, DType::Q8_0, 100},
          {"nemotron_moe_top6_q4_0", d, DType::Q4_0, 100},
          {"nemotron_moe_q4_k", f, DType::Q4_K, 40},
          {"granite_moe_tied", e, std::nullopt, 100, tie_experts_1_and_3},
          {"nemotron_latent_f32", g, std::nullopt, 100},
          {"nemotron_latent_q8_0", h, DType::Q8_0, 60}};
}

const Model& moe_model_for(const MoeShape& shape) {
  static std::map<std::string, std::unique_ptr<Model>> models;
  auto it = models.find(shape.name);
  if (it == models.end()) {
    LoadOptions load;
    load.weight_dtype = shape.load_dtype;
    const std::string dir = test::write_model(shape.options, "moe");
    if (shape.edit) shape.edit(dir);
    it = models.emplace(shape.name, Model::load(dir, load)).first;
  }
  return *it->second;
}

// gtest prints a shape as its name.
void PrintTo(const MoeShape& s, std::ostream* os) {
  *os << s.name;
}

class MoeExactness : public ::testing::TestWithParam<MoeShape> {};

TEST_P(MoeExactness, TheExpertsAreStoredInTheLoadDtype) {
  const DType expected = GetParam().load_dtype.value_or(GetParam().options.dtype);
  int64_t moe_blocks = 0;
  for (const auto& block : moe_model_for(GetParam()).blocks()) {
    if (block->kind() != BlockKind::Moe) continue;
    ++moe_blocks;
    for (const OpQuery& op : block->ops())
      if (op.kind == OpKind::Moe) {
        EXPECT_EQ(op.dtype, expected) << dtype_name(op.dtype);
      }
  }
  EXPECT_GT(moe_blocks, 0);
}

TEST_P(MoeExactness, PrefillEqualsDecodeStepsForEveryLength) {
  test::expect_prefill_equals_steps_for_every_length(moe_model_for(GetParam()), GetParam().max_length);
}

TEST_P(MoeExactness, ThreadCountsRoundSizesAndInstructionSetsChangeNoBit) {
  const Model& model = moe_model_for(GetParam());
  test::expect_threads_rounds_and_isas_change_no_bit(
      model, test::random_tokens(150, model.config().vocab_size, 4), {0, 1, 7, 64});
}

TEST_P(MoeExactness, EachSequenceOfABatchEqualsItAlone) {
  const Model& model = moe_model_for(GetParam());
  const std::vector<size_t> lengths = {1, 5, 17, 70, 3, 140};
  std::vector<std::vector<int32_t>> prompts;
  for (size_t i = 0; i < lengths.size(); ++i)
    prompts.push_back(test::random_tokens(lengths[i], model.config().vocab_size, 20 + i));
  test::expect_batch_equals_each_alone(model, prompts, {OutputKind::LogitsLast, OutputKind::LogitsAll},
                                       {0, 4});
  test::expect_batched_steps_equal_solo(model, ComputeContext{2, best_isa()}, prompts.size(), 12);
}

TEST_P(MoeExactness, PrefillThenDecodeContinuesLikeDecodeAllTheWay) {
  test::expect_prefill_then_decode_equals_decode(moe_model_for(GetParam()), ComputeContext{2, best_isa()},
                                                 {OutputKind::None, 8});
}

INSTANTIATE_TEST_SUITE_P(Shapes, MoeExactness, ::testing::ValuesIn(moe_shapes()),
                         [](const auto& info) { return info.param.name; });

// Nemotron-H's last expert of every layer gets a correction bias of -1000, so no row ever chooses
// it, and then all-NaN weights: a forward that read them (a dense evaluation of every expert, a
// GEMV over all experts weighted by zero) would turn the logits into NaN. Prefill and decode
// steps must give the bits of the same model with the expert's weights intact.
TEST(MoeExperts, ADecodeStepReadsOnlyTheExpertsItsRowsChoose) {
  MakeModelOptions o;
  o.config = test::nemotron_moe_config("ME*E", 6, 2);
  o.seed = 36;
  const int64_t last = o.config.hybrid.moe.n_experts - 1;
  const std::string banned_suffix = ".experts." + std::to_string(last) + ".";
  const std::string clean = test::write_model(o, "moe_clean"),
                    poisoned = test::write_model(o, "moe_poisoned");
  test::edit_tensors(clean, [&](const std::string& name, std::vector<float>& w) {
    if (name.ends_with("e_score_correction_bias")) w[last] = -1000.0f;
  });
  test::edit_tensors(poisoned, [&](const std::string& name, std::vector<float>& w) {
    if (name.ends_with("e_score_correction_bias")) w[last] = -1000.0f;
    if (name.find(banned_suffix) != std::string::npos) w.assign(w.size(), NAN);
  });
  const auto a = Model::load(clean), b = Model::load(poisoned);
  const ComputeContext ctx{2, best_isa()};
  const auto tokens = test::random_tokens(40, a->config().vocab_size, 9);
  SequenceState sa = a->new_state(), sb = b->new_state();
  const auto steps_a = test::step_logits(*a, ctx, tokens, sa),
             steps_b = test::step_logits(*b, ctx, tokens, sb);
  for (float v : steps_b) ASSERT_TRUE(std::isfinite(v));
  EXPECT_TRUE(same_bits(steps_a, steps_b));
  SequenceState pa = a->new_state(), pb = b->new_state();
  EXPECT_TRUE(same_bits(test::prefill(*a, ctx, tokens, pa, {OutputKind::LogitsAll, 0}),
                        test::prefill(*b, ctx, tokens, pb, {OutputKind::LogitsAll, 0})));
}

}  // namespace
}  // namespace mb

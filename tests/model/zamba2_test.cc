// SPDX-License-Identifier: MIT
// Zamba2 (model_type "zamba2"): its config keys and refusals, the shared transformer blocks'
// weights bound once, and the bitwise contract (tests/model/hybrid_exactness_test.cc's) on
// make-model checkpoints of the family: prefill == decode steps for the logits and every state
// part, thread counts, round sizes (the KV handoff between rounds) and instruction sets, a sequence
// in a batch == alone, a state's KV parts per hybrid layer. The logits themselves are checked
// against the float64 golden in golden_test.cc.
#include <gtest/gtest.h>

#include <map>
#include <nlohmann/json.hpp>

#include "common/model_fixture.h"
#include "common/test_util.h"
#include "common/zamba2_config.h"
#include "core/error.h"
#include "model/weight_binder.h"

namespace mb {
namespace {

using nlohmann::json;
using test::same_bits;

ModelConfig zamba2_test_config(const json& changes) {
  return test::zamba2_config(changes);
}

struct Zamba2Shape {
  std::string name;
  json changes;
  DType dtype;
  int64_t max_length;
};

// Layers "mamba, hybrid, hybrid, mamba, hybrid, hybrid": two shared blocks used twice each,
// adapters on q/k/v and RoPE (as the 1.2B and 7B); then one shared block for every hybrid layer,
// no attention adapters and no RoPE (as the 2.7B's defaults), in bf16, with the long-context base.
std::vector<Zamba2Shape> zamba2_shapes() {
  const json types = {"mamba", "hybrid", "hybrid", "mamba", "hybrid", "hybrid"};
  return {{"two_blocks_rope_lora", {{"layers_block_type", types}, {"rope_theta", 1e4}}, DType::F32, 200},
          {"one_block_bf16",
           {{"layers_block_type", types},
            {"num_mem_blocks", 1},
            {"use_shared_attention_adapter", false},
            {"use_mem_rope", false}},
           DType::BF16,
           100},
          {"long_context_rope",
           {{"layers_block_type", {"hybrid", "mamba", "mamba", "hybrid", "mamba", "hybrid"}},
            {"use_long_context", true},
            {"num_mem_blocks", 3}},
           DType::F32,
           100}};
}

const Model& zamba2_model_for(const Zamba2Shape& shape) {
  static std::map<std::string, std::unique_ptr<Model>> models;
  auto it = models.find(shape.name);
  if (it == models.end()) {
    MakeModelOptions options;
    options.config = zamba2_test_config(shape.changes);
    options.dtype = shape.dtype;
    options.seed = 31;
    it = models.emplace(shape.name, Model::load(test::write_model(options, "zamba2"))).first;
  }
  return *it->second;
}

class Zamba2Exactness : public ::testing::TestWithParam<Zamba2Shape> {};

TEST_P(Zamba2Exactness, PrefillEqualsDecodeStepsForEveryLength) {
  test::expect_prefill_equals_steps_for_every_length(zamba2_model_for(GetParam()), GetParam().max_length);
}

TEST_P(Zamba2Exactness, ThreadCountsRoundSizesAndInstructionSetsChangeNoBit) {
  const Model& model = zamba2_model_for(GetParam());
  test::expect_threads_rounds_and_isas_change_no_bit(
      model, test::random_tokens(100, model.config().vocab_size, 4), {0, 1, 7, 64});
  // The chunked (SSD) form: its rounds' chunk boundaries move its roundings, threads and ISAs not.
  test::expect_threads_rounds_and_isas_change_no_bit(
      model, test::random_tokens(70, model.config().vocab_size, 5), {0}, ScanForm::Chunked);
}

TEST_P(Zamba2Exactness, EachSequenceOfABatchEqualsItAlone) {
  const Model& model = zamba2_model_for(GetParam());
  const std::vector<size_t> lengths = {1, 5, 17, 70, 3};
  std::vector<std::vector<int32_t>> prompts;
  for (size_t i = 0; i < lengths.size(); ++i)
    prompts.push_back(test::random_tokens(lengths[i], model.config().vocab_size, 40 + i));
  test::expect_batch_equals_each_alone(model, prompts, {OutputKind::LogitsLast, OutputKind::LogitsAll},
                                       {0, 4});
  test::expect_batched_steps_equal_solo(model, ComputeContext{2, best_isa()}, prompts.size(), 8);
}

TEST_P(Zamba2Exactness, PrefillThenDecodeContinuesLikeDecodeAllTheWay) {
  test::expect_prefill_then_decode_equals_decode(zamba2_model_for(GetParam()), ComputeContext{2, best_isa()},
                                                 {OutputKind::None, 8});
}

TEST_P(Zamba2Exactness, EachHybridLayerKeepsItsOwnKeysAndValuesAndAStateRestoresExactly) {
  const Model& model = zamba2_model_for(GetParam());
  const ComputeContext ctx{2, best_isa()};
  const auto tokens = test::random_tokens(30, model.config().vocab_size, 9);
  const std::vector<int32_t> first(tokens.begin(), tokens.begin() + 19),
      rest(tokens.begin() + 19, tokens.end());
  SequenceState state = model.new_state();
  test::prefill(model, ctx, first, state, {OutputKind::None, 0});
  // Keys and values of every hybrid layer, even where two layers share a block's weights.
  const Zamba2Config& z = model.config().zamba2;
  const StateShape shape = model.state_layout().shape();
  ASSERT_EQ(shape.growing.size(), 2 * z.hybrid_layers.size());
  for (int64_t per_position : shape.growing) EXPECT_EQ(per_position, z.n_kv_heads * z.head_dim);
  SequenceState restored = model.state_from_host(state.download(), state.position, "the saved state");
  const auto expected = test::step_logits(model, ctx, rest, state);
  EXPECT_TRUE(same_bits(test::step_logits(model, ctx, rest, restored), expected));
  EXPECT_TRUE(same_bits(restored.download(), state.download()));
}

INSTANTIATE_TEST_SUITE_P(Shapes, Zamba2Exactness, ::testing::ValuesIn(zamba2_shapes()),
                         [](const auto& info) { return info.param.name; });

TEST(Zamba2Config, ReadsTheLayerPatternAndDerivesTheSizes) {
  const ModelConfig c =
      zamba2_test_config({{"layers_block_type", {"mamba", "hybrid", "mamba", "hybrid", "hybrid", "mamba"}},
                          {"num_attention_heads", 8},
                          {"n_mamba_heads", 4}});
  EXPECT_EQ(c.family, ModelFamily::Zamba2);
  EXPECT_EQ(c.zamba2.hybrid_layers, (std::vector<int64_t>{1, 3, 4}));
  EXPECT_EQ(c.zamba2.head_dim, 8);  // 2 x 32 / 8
  EXPECT_EQ(c.zamba2.n_kv_heads, 8);
  EXPECT_EQ(c.ssm.headdim, 16);  // 2 x 32 / 4
  const std::vector<BlockSpec> blocks = c.blocks();
  ASSERT_EQ(blocks.size(), 9u);  // one block per Mamba layer, two per hybrid layer
  EXPECT_EQ(blocks[1].kind, BlockKind::Zamba2Shared);
  EXPECT_EQ(blocks[2].kind, BlockKind::Mamba2Mixer);
  EXPECT_EQ(blocks[2].tensor("in_proj.weight"), "model.layers.1.mamba_decoder.mamba.in_proj.weight");
  EXPECT_EQ(blocks[0].norm(), "model.layers.0.input_layernorm.weight");
}

TEST(Zamba2Config, TransformersDefaultsApplyWhereKeysAreAbsent) {
  json config = {{"model_type", "zamba2"}, {"hidden_size", 64}, {"vocab_size", 100}};
  const ModelConfig c = parse_model_config(config, "defaults");
  EXPECT_EQ(c.n_layer, 54);
  EXPECT_EQ(c.zamba2.hybrid_layers, (std::vector<int64_t>{6, 12, 18, 24, 30, 36, 42, 47, 51}));
  EXPECT_EQ(c.zamba2.mem_blocks, 1);
  EXPECT_EQ(c.zamba2.mlp_width, 256);
  EXPECT_EQ(c.zamba2.adapter_rank, 128);
  EXPECT_FALSE(c.zamba2.mem_rope);
  EXPECT_FALSE(c.zamba2.attention_adapter);
  EXPECT_TRUE(c.tie_embeddings);
  EXPECT_EQ(c.ssm.d_state, 64);
}

void expect_zamba2_refused(const json& changes, const std::string& needle) {
  try {
    zamba2_test_config(changes);
    ADD_FAILURE() << "accepted " << changes.dump();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

TEST(Zamba2Config, UnsupportedSettingsAreRefusedNamingTheKey) {
  expect_zamba2_refused({{"hidden_act", "gelu_pytorch_tanh"}}, "hidden_act");
  expect_zamba2_refused({{"num_key_value_heads", 2}}, "num_key_value_heads");
  expect_zamba2_refused({{"num_attention_heads", 5}}, "num_attention_heads");
  expect_zamba2_refused({{"n_mamba_heads", 5}}, "n_mamba_heads");
  expect_zamba2_refused({{"rms_norm_eps", 1e-6}}, "rms_norm_eps");
  expect_zamba2_refused({{"add_bias_linear", true}}, "add_bias_linear");
  expect_zamba2_refused({{"layers_block_type", {"mamba", "attention", "mamba", "mamba", "mamba", "mamba"}}},
                        "layers_block_type");
  expect_zamba2_refused({{"layers_block_type", {"mamba", "hybrid"}}}, "layers_block_type");
  expect_zamba2_refused({{"layers_block_type", "mamba"}}, "layers_block_type");
}

TEST(Zamba2Weights, ASharedBlockIsBoundOnceAndEveryUseReadsTheSameMatrices) {
  MakeModelOptions options;
  options.config =
      zamba2_test_config({{"layers_block_type", {"mamba", "hybrid", "hybrid", "mamba", "hybrid", "hybrid"}}});
  options.seed = 3;
  const std::string dir = test::write_model(options, "zamba2_shared");
  const TensorSet tensors = TensorSet::open_dir(dir);
  // Block 0 lives under its first use (layer 1) only; layer 4 (its second use) holds no copy.
  EXPECT_TRUE(tensors.find("model.layers.1.shared_transformer.self_attn.q_proj.weight") != nullptr);
  EXPECT_TRUE(tensors.find("model.layers.2.shared_transformer.self_attn.q_proj.weight") != nullptr);
  EXPECT_TRUE(tensors.find("model.layers.4.shared_transformer.self_attn.q_proj.weight") == nullptr);
  // The second use's adapters sit with the block, indexed by the hybrid ordinal (2).
  EXPECT_TRUE(tensors.find("model.layers.1.shared_transformer.self_attn.linear_q_adapter_list.2.0.weight") !=
              nullptr);
  WeightBinder binder(tensors, std::nullopt);
  const std::string q = "model.layers.1.shared_transformer.self_attn.q_proj.weight";
  const WeightMatrix first = binder.matrix(q, 64, 64);
  const size_t bytes = binder.packed_matrix_bytes();
  EXPECT_EQ(binder.matrix(q, 64, 64).data, first.data);
  EXPECT_EQ(binder.packed_matrix_bytes(), bytes);
}

}  // namespace
}  // namespace mb

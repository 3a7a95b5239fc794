// SPDX-License-Identifier: MIT
// Jamba (model/families/jamba.h): the config as HF's JambaConfig reads it (the layer pattern, MoE
// placement, the refusals naming their key), the expert layers' routing (a softmax over every
// expert, top k, no renormalisation) against a dense model of the same weights, and the bitwise
// contract (prefill == decode, threads, rounds across the KV handoff, batches) on make-model
// checkpoints with and without experts.
#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <nlohmann/json.hpp>

#include "common/model_fixture.h"
#include "common/test_util.h"
#include "core/error.h"
#include "engine/state_file.h"
#include "io/safetensors.h"
#include "model/families/jamba.h"
#include "model/family.h"
#include "ops/quant.h"

namespace mb {
namespace {

using nlohmann::json;
using test::same_bits;

// A small Jamba config from the family's example with `changes` applied.
json jamba_json(int64_t d_model, int64_t n_layer, const json& changes = json::object()) {
  json hf = jamba_family().example(d_model, n_layer, 131);
  hf.update(changes);
  return hf;
}

ModelConfig jamba_parsed(const json& hf) {
  return parse_model_config(hf, "jamba config");
}

// Jamba-1.5-Mini's config.json (hybrids.md 5.2).
json jamba_mini_json() {
  return json::parse(R"({
    "model_type": "jamba", "architectures": ["JambaForCausalLM"],
    "hidden_size": 4096, "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8,
    "intermediate_size": 14336, "vocab_size": 65536, "tie_word_embeddings": false, "rms_norm_eps": 1e-06,
    "attn_layer_offset": 4, "attn_layer_period": 8, "expert_layer_offset": 1, "expert_layer_period": 2,
    "num_experts": 16, "num_experts_per_tok": 2, "mamba_d_state": 16, "mamba_d_conv": 4, "mamba_expand": 2,
    "mamba_dt_rank": 256, "mamba_conv_bias": true, "mamba_proj_bias": false, "hidden_act": "silu",
    "max_position_embeddings": 262144, "sliding_window": null, "eos_token_id": [2, 518]})");
}

TEST(JambaConfig, JambaMiniHasAttentionEveryEighthLayerAndExpertsOnOddLayers) {
  const ModelConfig c = jamba_parsed(jamba_mini_json());
  EXPECT_EQ(c.family, ModelFamily::Jamba);
  EXPECT_EQ(c.arch, Architecture::Mamba1);
  EXPECT_EQ(c.ssm.d_inner, 8192);
  EXPECT_EQ(c.ssm.dt_rank, 256);
  EXPECT_TRUE(c.ssm.mixer_rms_norm && c.ssm.mixer_norm_weights);
  EXPECT_EQ(c.ssm.mixer_rms_eps, static_cast<double>(c.norm_eps));
  EXPECT_EQ(c.hybrid.attention.head_dim, 128);
  EXPECT_EQ(c.hybrid.attention.rope_theta, 0.0);
  EXPECT_EQ(c.hybrid.moe.scoring, MoeScoring::SoftmaxAll);
  EXPECT_FALSE(c.hybrid.moe.normalize);
  EXPECT_EQ(c.eos_token_ids, (std::vector<int32_t>{2, 518}));
  const std::vector<BlockSpec> blocks = c.blocks();
  ASSERT_EQ(blocks.size(), 64u);
  for (int64_t l = 0; l < 32; ++l) {
    const BlockSpec& mixer = blocks[2 * l];
    EXPECT_EQ(mixer.kind, l % 8 == 4 ? BlockKind::Attention : BlockKind::Mamba1Mixer) << l;
    EXPECT_EQ(blocks[2 * l + 1].kind, BlockKind::JambaFfn);
    EXPECT_EQ(c.jamba.experts_at(l, c.hybrid.moe.n_experts), l % 2 == 1) << l;
  }
  EXPECT_EQ(blocks[8].tensor("q_proj.weight"), "model.layers.4.self_attn.q_proj.weight");
  EXPECT_EQ(blocks[0].tensor("dt_layernorm.weight"), "model.layers.0.mamba.dt_layernorm.weight");
  EXPECT_EQ(blocks[1].norm(), "model.layers.0.pre_ff_layernorm.weight");
}

TEST(JambaConfig, OneExpertMeansEveryLayerIsADenseMlp) {
  const ModelConfig c = jamba_parsed(jamba_json(32, 4, {{"num_experts", 1}, {"num_experts_per_tok", 1}}));
  for (int64_t l = 0; l < 4; ++l) EXPECT_FALSE(c.jamba.experts_at(l, c.hybrid.moe.n_experts));
  EXPECT_EQ(c.hybrid.pattern, "M*MM");
}

TEST(JambaConfig, SettingsTheEngineCannotRunAreRefusedNamingTheKey) {
  const std::vector<std::pair<json, std::string>> cases = {
      {{{"hidden_act", "gelu"}}, "hidden_act"},
      {{{"sliding_window", 4096}}, "sliding_window"},
      {{{"num_experts_per_tok", 5}}, "num_experts_per_tok"},
      {{{"mamba_d_state", "16"}}, "mamba_d_state"},
      {{{"attn_layer_period", 0}}, "attn_layer_period"},
      {{{"num_key_value_heads", 3}}, "num_key_value_heads"},
  };
  for (const auto& [change, key] : cases) {
    const std::string message = test::error_of([&] { jamba_parsed(jamba_json(32, 4, change)); });
    EXPECT_NE(message.find(key), std::string::npos) << change.dump() << ": " << message;
  }
  json no_rank = jamba_json(32, 4);
  no_rank.erase("mamba_dt_rank");
  EXPECT_NE(test::error_of([&] { jamba_parsed(no_rank); }).find("mamba_dt_rank"), std::string::npos);
}

// ---------------------------------------------------------------------------------------------
// The expert layers' routing. With every expert equal and a zero router, each of the k chosen
// experts has probability 1 / E (softmax over all E), so the layer is k / E times one expert:
// a dense model whose down_proj is that expert's times k / E (2 / 4, exact) gives the same logits.
// Renormalising the chosen weights (to 1) would double the branch.

void jamba_copy_tensors(const std::string& from_dir, const std::string& to_dir, int64_t n_layer,
                        float factor) {
  const TensorSet from = TensorSet::open_dir(from_dir);
  std::map<std::string, std::vector<float>> values;
  for (const auto& [name, tensor] : from.tensors()) {
    std::vector<float> v(static_cast<size_t>(tensor.element_count()));
    dequantize_row(*tensor.dtype, tensor.data, tensor.element_count(), v.data());
    values[name] = std::move(v);
  }
  test::edit_tensors(to_dir, [&](const std::string& name, std::vector<float>& v) {
    std::string source = name;
    for (int64_t l = 0; l < n_layer; ++l) {
      const std::string ffn = "model.layers." + std::to_string(l) + ".feed_forward.";
      for (const char* m : {"gate_proj", "up_proj", "down_proj"})
        if (name == ffn + m + ".weight" && !values.contains(name))
          source = ffn + "experts.0." + m + ".weight";
    }
    ASSERT_TRUE(values.contains(source)) << name;
    v = values[source];
    if (source != name && source.find("down_proj") != std::string::npos)
      for (float& x : v) x *= factor;
  });
}

TEST(JambaExperts, ChosenExpertsAreWeightedByTheirSoftmaxOverAllExpertsWithoutRenormalising) {
  MakeModelOptions moe;
  moe.config = jamba_parsed(jamba_json(32, 4, {{"num_experts", 4}, {"num_experts_per_tok", 2}}));
  moe.seed = 41;
  const std::string moe_dir = test::write_model(moe, "jamba_equal_experts");
  std::map<std::string, std::vector<float>> expert0;
  test::edit_tensors(moe_dir, [&](const std::string& name, std::vector<float>& v) {
    if (name.find("experts.0.") != std::string::npos) expert0[name] = v;
  });
  test::edit_tensors(moe_dir, [&](const std::string& name, std::vector<float>& v) {
    if (name.ends_with("router.weight")) std::fill(v.begin(), v.end(), 0.0f);
    const size_t at = name.find("experts.");
    if (at == std::string::npos) return;
    const size_t dot = name.find('.', at + 8);
    v = expert0.at(name.substr(0, at + 8) + "0" + name.substr(dot));
  });
  MakeModelOptions dense = moe;
  dense.config = jamba_parsed(jamba_json(32, 4, {{"num_experts", 1}, {"num_experts_per_tok", 1}}));
  const std::string dense_dir = test::write_model(dense, "jamba_equal_experts_dense");
  jamba_copy_tensors(moe_dir, dense_dir, 4, 0.5f);
  // The same with the weights renormalised to sum to 1: what the model must not compute.
  const std::string renormalised_dir = test::write_model(dense, "jamba_equal_experts_renormalised");
  jamba_copy_tensors(moe_dir, renormalised_dir, 4, 1.0f);

  const auto tokens = test::random_tokens(20, 131, 3);
  const ComputeContext ctx{1, best_isa()};
  const auto run = [&](const std::string& dir) {
    auto model = Model::load(dir);
    SequenceState state = model->new_state();
    return test::prefill(*model, ctx, tokens, state, {OutputKind::LogitsAll, 0});
  };
  const std::vector<float> got = run(moe_dir), want = run(dense_dir), renormalised = run(renormalised_dir);
  EXPECT_LE(test::max_abs_diff(got, want), 1e-5 * test::max_abs(want));
  EXPECT_GT(test::max_abs_diff(got, renormalised), 1e-2 * test::max_abs(want));
}

// num_experts_per_tok changes no tensor, only the math: a state saved by one Jamba is refused by
// the same weights run with another top-k (the fingerprint hashes every declared Math key).
TEST(JambaState, AStateOfOneTopKIsRefusedByAnother) {
  MakeModelOptions two;
  two.config = jamba_parsed(jamba_json(32, 2, {{"num_experts", 4}, {"num_experts_per_tok", 2}}));
  two.seed = 43;
  MakeModelOptions three = two;
  three.config = jamba_parsed(jamba_json(32, 2, {{"num_experts", 4}, {"num_experts_per_tok", 3}}));
  const auto a = Model::load(test::write_model(two, "jamba_state_top2"));
  const auto b = Model::load(test::write_model(three, "jamba_state_top3"));
  const std::string path = test::make_temp_dir("jamba_state") + "/a.state";
  save_state(path, *a, test::state_after(*a, test::random_tokens(5, 131, 9)));
  EXPECT_EQ(load_state(path, *a).position, 5);
  EXPECT_NE(test::error_of([&] { load_state(path, *b); }).find("different model"), std::string::npos);
}

// ---------------------------------------------------------------------------------------------
// The bitwise contract.

struct JambaShape {
  std::string name;
  MakeModelOptions options;
  int64_t max_length;
};

// Experts (5, 2 per token) on odd layers, one of them an attention layer (1 and 4 attend), in
// f32; a dense model in bf16 with attention first (offset 0).
std::vector<JambaShape> jamba_shapes() {
  MakeModelOptions a;
  a.config = jamba_parsed(jamba_json(40, 6,
                                     {{"attn_layer_period", 3},
                                      {"attn_layer_offset", 1},
                                      {"num_experts", 5},
                                      {"num_experts_per_tok", 2},
                                      {"intermediate_size", 24}}));
  a.seed = 51;
  MakeModelOptions b;
  b.config = jamba_parsed(jamba_json(
      32, 5,
      {{"attn_layer_period", 4}, {"attn_layer_offset", 0}, {"num_experts", 1}, {"num_experts_per_tok", 1}}));
  b.dtype = DType::BF16;
  b.seed = 52;
  return {{"moe_f32", a, 160}, {"dense_bf16", b, 100}};
}

const Model& jamba_model_for(const JambaShape& shape) {
  static std::map<std::string, std::unique_ptr<Model>> models;
  auto it = models.find(shape.name);
  if (it == models.end())
    it = models.emplace(shape.name, Model::load(test::write_model(shape.options, "jamba"))).first;
  return *it->second;
}

class JambaExactness : public ::testing::TestWithParam<JambaShape> {};

TEST_P(JambaExactness, PrefillEqualsDecodeStepsForEveryLength) {
  test::expect_prefill_equals_steps_for_every_length(jamba_model_for(GetParam()), GetParam().max_length);
}

TEST_P(JambaExactness, ThreadCountsRoundSizesAndInstructionSetsChangeNoBit) {
  const Model& model = jamba_model_for(GetParam());
  // Rounds of 1, 7 and 64 positions hand the KV cache over between rounds.
  test::expect_threads_rounds_and_isas_change_no_bit(model, test::random_tokens(100, 131, 4), {0, 1, 7, 64});
}

TEST_P(JambaExactness, EachSequenceOfABatchEqualsItAlone) {
  const Model& model = jamba_model_for(GetParam());
  const std::vector<size_t> lengths = {1, 5, 17, 70, 3, 140};
  std::vector<std::vector<int32_t>> prompts;
  for (size_t i = 0; i < lengths.size(); ++i) prompts.push_back(test::random_tokens(lengths[i], 131, 20 + i));
  test::expect_batch_equals_each_alone(model, prompts, {OutputKind::LogitsLast, OutputKind::LogitsAll},
                                       {0, 4});
  test::expect_batched_steps_equal_solo(model, ComputeContext{2, best_isa()}, prompts.size(), 12);
}

TEST_P(JambaExactness, PrefillThenDecodeContinuesLikeDecodeAllTheWay) {
  test::expect_prefill_then_decode_equals_decode(jamba_model_for(GetParam()), ComputeContext{2, best_isa()},
                                                 {OutputKind::None, 8});
}

TEST_P(JambaExactness, AForkAndARestoredStateContinueExactly) {
  const Model& model = jamba_model_for(GetParam());
  const ComputeContext ctx{2, best_isa()};
  const auto tokens = test::random_tokens(50, 131, 7);
  const std::vector<int32_t> first(tokens.begin(), tokens.begin() + 31),
      rest(tokens.begin() + 31, tokens.end());
  SequenceState state = model.new_state();
  test::prefill(model, ctx, first, state, {OutputKind::None, 0});
  SequenceState fork = state;
  SequenceState restored = model.state_from_host(state.download(), state.position, "the saved state");
  const auto expected = test::step_logits(model, ctx, rest, state);
  EXPECT_TRUE(same_bits(test::step_logits(model, ctx, rest, fork), expected));
  EXPECT_TRUE(same_bits(test::step_logits(model, ctx, rest, restored), expected));
  EXPECT_TRUE(same_bits(restored.download(), state.download()));
}

INSTANTIATE_TEST_SUITE_P(Shapes, JambaExactness, ::testing::ValuesIn(jamba_shapes()),
                         [](const auto& info) { return info.param.name; });

}  // namespace
}  // namespace mb

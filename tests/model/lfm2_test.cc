// SPDX-License-Identifier: MIT
// LFM2 and LFM2-MoE (../shared/specs/hybrids-2.md section 2): the config as transformers reads it
// (aliases, the FFN width, refusals naming the key), and the bitwise contract on make-model
// checkpoints of both (gated short convolutions, QK-norm RoPE attention, SwiGLU or experts): a
// prefill equals its decode steps (logits and every state part), the thread count, the round size
// (the KV handoff and the conv history between rounds) and the batch change no bit, and a state
// continues exactly after a fork or a round trip through its host form. Every comparison is memcmp.
// The golden logits of a 6-layer LFM2 are in golden_test.cc.
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>

#include "common/model_fixture.h"
#include "common/test_util.h"
#include "core/error.h"
#include "engine/state_file.h"
#include "io/safetensors.h"
#include "model/family.h"
#include "model/model.h"
#include "ops/quant.h"

namespace mb {
namespace {

using nlohmann::json;
using test::same_bits;

// LFM2 with `pattern` of 'C' (conv) and '*' (attention): 4 heads of 12 over 2 KV heads, an FFN
// 40 wide (block_ff_dim 40 taken as it is), conv_L_cache 3.
ModelConfig lfm2_test_config(const std::string& pattern, int64_t d_model = 48, int64_t vocab = 131) {
  ModelConfig c;
  c.family = ModelFamily::Lfm2;
  c.arch = Architecture::Mamba2;
  c.d_model = d_model;
  c.n_layer = static_cast<int64_t>(pattern.size());
  c.vocab_size = vocab;
  c.norm_eps = 1e-5f;
  c.tie_embeddings = true;
  c.hybrid.pattern = pattern;
  c.hybrid.attention = {4, 2, d_model / 4, 1.0 / std::sqrt(double(d_model / 4)), false, 1e6};
  c.hybrid.mlp = {40, Activation::SwiGlu, false};
  c.lfm2.block_ff_dim = 40;
  c.lfm2.auto_adjust_ff_dim = false;
  c.lfm2.multiple_of = 1;
  return c;
}

// LFM2-MoE: one dense layer first, then 6 experts of 20, 2 chosen per row (sigmoid scores, the
// expert bias, renormalized, scaled by 1.5).
ModelConfig lfm2_moe_test_config(const std::string& pattern) {
  ModelConfig c = lfm2_test_config(pattern, 40);
  c.family = ModelFamily::Lfm2Moe;
  c.hybrid.attention = {4, 1, 10, 1.0 / std::sqrt(10.0), false, 1e4};
  c.lfm2.n_dense_layers = 1;
  c.hybrid.moe.n_experts = 6;
  c.hybrid.moe.top_k = 2;
  c.hybrid.moe.width = 20;
  c.hybrid.moe.scoring = MoeScoring::SigmoidBias;
  c.hybrid.moe.normalize = true;
  c.hybrid.moe.scale = 1.5;
  return c;
}

struct Lfm2Shape {
  std::string name;
  MakeModelOptions options;
  int64_t max_length;
};

std::vector<Lfm2Shape> lfm2_shapes() {
  MakeModelOptions a;
  a.config = lfm2_test_config("CC*C*");
  a.seed = 41;
  MakeModelOptions b;
  b.config = lfm2_test_config("*CC*", 32);
  b.dtype = DType::BF16;
  b.seed = 42;
  MakeModelOptions c;
  c.config = lfm2_moe_test_config("C*CC*");
  c.seed = 43;
  return {{"lfm2_f32", a, 200}, {"lfm2_bf16", b, 100}, {"lfm2_moe_f32", c, 200}};
}

const Model& lfm2_model_for(const Lfm2Shape& shape) {
  static std::map<std::string, std::unique_ptr<Model>> models;
  auto it = models.find(shape.name);
  if (it == models.end())
    it = models.emplace(shape.name, Model::load(test::write_model(shape.options, "lfm2"))).first;
  return *it->second;
}

class Lfm2Exactness : public ::testing::TestWithParam<Lfm2Shape> {};

TEST_P(Lfm2Exactness, PrefillEqualsDecodeStepsForEveryLength) {
  test::expect_prefill_equals_steps_for_every_length(lfm2_model_for(GetParam()), GetParam().max_length);
}

TEST_P(Lfm2Exactness, ThreadCountsRoundSizesAndInstructionSetsChangeNoBit) {
  const Model& model = lfm2_model_for(GetParam());
  test::expect_threads_rounds_and_isas_change_no_bit(
      model, test::random_tokens(120, model.config().vocab_size, 4), {0, 1, 2, 7, 64});
}

TEST_P(Lfm2Exactness, EachSequenceOfABatchEqualsItAlone) {
  const Model& model = lfm2_model_for(GetParam());
  const std::vector<size_t> lengths = {1, 5, 17, 70, 2, 3};
  std::vector<std::vector<int32_t>> prompts;
  for (size_t i = 0; i < lengths.size(); ++i)
    prompts.push_back(test::random_tokens(lengths[i], model.config().vocab_size, 30 + i));
  test::expect_batch_equals_each_alone(
      model, prompts, {OutputKind::LogitsLast, OutputKind::LogitsAll, OutputKind::HiddenMean}, {0, 4});
  test::expect_batched_steps_equal_solo(model, ComputeContext{2, best_isa()}, prompts.size(), 10);
}

TEST_P(Lfm2Exactness, PrefillThenDecodeContinuesLikeDecodeAllTheWay) {
  test::expect_prefill_then_decode_equals_decode(lfm2_model_for(GetParam()), ComputeContext{2, best_isa()},
                                                 {OutputKind::None, 8});
}

TEST_P(Lfm2Exactness, AStateHoldsTheConvHistoryAndTheKvCacheAndContinuesAfterAForkOrARestore) {
  const Model& model = lfm2_model_for(GetParam());
  const ComputeContext ctx{2, best_isa()};
  const ModelConfig& c = model.config();
  const auto tokens = test::random_tokens(50, c.vocab_size, 9);
  const std::vector<int32_t> first(tokens.begin(), tokens.begin() + 29),
      rest(tokens.begin() + 29, tokens.end());
  SequenceState state = model.new_state();
  test::prefill(model, ctx, first, state, {OutputKind::None, 0});
  // Each conv layer holds L - 1 = 2 columns of d_model; each attention layer 29 positions of keys
  // and values.
  const int64_t convs = std::count(c.hybrid.pattern.begin(), c.hybrid.pattern.end(), 'C');
  const int64_t attention = static_cast<int64_t>(c.hybrid.pattern.size()) - convs;
  const StateShape shape = model.state_layout().shape();
  EXPECT_EQ(shape.fixed_floats, convs * 2 * c.d_model);
  const int64_t kv = c.hybrid.attention.n_kv_heads * c.hybrid.attention.head_dim;
  ASSERT_EQ(shape.growing.size(), static_cast<size_t>(2 * attention));
  EXPECT_EQ(state.floats(), static_cast<size_t>(shape.fixed_floats + 29 * 2 * attention * kv));
  SequenceState fork = state;
  SequenceState restored = model.state_from_host(state.download(), state.position, "the saved state");
  const auto expected = test::step_logits(model, ctx, rest, state);
  EXPECT_TRUE(same_bits(test::step_logits(model, ctx, rest, fork), expected));
  EXPECT_TRUE(same_bits(test::step_logits(model, ctx, rest, restored), expected));
  EXPECT_TRUE(same_bits(fork.download(), state.download()));
  EXPECT_TRUE(same_bits(restored.download(), state.download()));
}

INSTANTIATE_TEST_SUITE_P(Lfm2, Lfm2Exactness, ::testing::ValuesIn(lfm2_shapes()),
                         [](const auto& info) { return info.param.name; });

TEST(Lfm2State, AStateFileOfAnotherRopeThetaOrExpertScaleIsRefused) {
  // Both keys change the math but not the tensors: the fingerprint must tell the models apart.
  for (const bool moe : {false, true}) {
    MakeModelOptions o;
    o.config = moe ? lfm2_moe_test_config("C*C") : lfm2_test_config("C*C");
    o.seed = 44;
    const std::string dir = test::write_model(o, moe ? "lfm2_state_moe" : "lfm2_state");
    const std::string other = dir + "_other";
    std::filesystem::remove_all(other);
    std::filesystem::copy(dir, other);
    json config = json::parse(read_text_file(other + "/config.json"));
    config[moe ? "routed_scaling_factor" : "rope_theta"] = moe ? 2.0 : 5e5;
    test::write_bytes(other + "/config.json", config.dump());
    const auto a = Model::load(dir);
    const auto b = Model::load(other);
    SequenceState state = a->new_state();
    test::prefill(*a, ComputeContext{1, best_isa()}, {1, 2, 3}, state, {OutputKind::None, 0});
    save_state(dir + "/s.state", *a, state);
    EXPECT_NO_THROW(load_state(dir + "/s.state", *a));
    EXPECT_THROW(load_state(dir + "/s.state", *b), Error) << (moe ? "routed_scaling_factor" : "rope_theta");
  }
}

TEST(Lfm2MoeFolder, TheHubsPerExpertTensorsGiveTheStackedFormsBits) {
  // The hub's LFM2-8B-A1B files: experts.{e}.w1 / w3 / w2, one tensor per expert and matrix.
  MakeModelOptions o;
  o.config = lfm2_moe_test_config("C*C");
  o.seed = 45;
  const std::string dir = test::write_model(o, "lfm2_moe_stacked");
  const std::string hub = dir + "_per_expert";
  std::filesystem::remove_all(hub);
  std::filesystem::copy(dir, hub);
  const int64_t E = o.config.hybrid.moe.n_experts, W = o.config.hybrid.moe.width, d = o.config.d_model;
  SafetensorsWriter writer;
  {
    const TensorSet tensors = TensorSet::open_file(dir + "/model.safetensors");
    for (const auto& [name, tensor] : tensors.tensors()) {
      std::vector<float> values(static_cast<size_t>(tensor.element_count()));
      dequantize_row(*tensor.dtype, tensor.data, tensor.element_count(), values.data());
      const size_t at = name.find("experts.");
      if (at == std::string::npos) {
        writer.add_f32(name, tensor.shape, values, *tensor.dtype);
        continue;
      }
      const std::string prefix = name.substr(0, at) + "experts.";
      const bool up = name.ends_with("gate_up_proj");
      for (int64_t e = 0; e < E; ++e) {
        const float* expert = values.data() + e * 2 * W * d;
        if (up) {
          writer.add_f32(prefix + std::to_string(e) + ".w1.weight", {W, d}, {expert, expert + W * d},
                         DType::F32);
          writer.add_f32(prefix + std::to_string(e) + ".w3.weight", {W, d},
                         {expert + W * d, expert + 2 * W * d}, DType::F32);
        } else {
          const float* down = values.data() + e * d * W;
          writer.add_f32(prefix + std::to_string(e) + ".w2.weight", {d, W}, {down, down + d * W}, DType::F32);
        }
      }
    }
  }
  writer.write(hub + "/model.safetensors");
  const auto stacked = Model::load(dir);
  const auto per_expert = Model::load(hub);
  const auto tokens = test::random_tokens(17, o.config.vocab_size, 12);
  SequenceState a = stacked->new_state(), b = per_expert->new_state();
  const ComputeContext ctx{1, best_isa()};
  EXPECT_TRUE(same_bits(test::prefill(*per_expert, ctx, tokens, b, {OutputKind::LogitsAll, 0}),
                        test::prefill(*stacked, ctx, tokens, a, {OutputKind::LogitsAll, 0})));
}

// ---- config ---------------------------------------------------------------------------------------

json lfm2_hf_config() {
  return {{"model_type", "lfm2"},
          {"hidden_size", 64},
          {"num_hidden_layers", 6},
          {"vocab_size", 256},
          {"num_attention_heads", 4},
          {"num_key_value_heads", 2},
          {"block_ff_dim", 200},
          {"block_multiple_of", 64},
          {"layer_types", {"conv", "conv", "full_attention", "conv", "full_attention", "conv"}}};
}

ModelConfig parse_lfm2_test_json(const json& j) {
  return parse_model_config(j, "'config.json'");
}

std::string lfm2_config_error(const json& j) {
  try {
    parse_model_config(j, "'config.json'");
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(Lfm2Config, ReadsTheReleasedKeysAndDerivesTheFfnWidthAsLfm2MlpDoes) {
  const ModelConfig c = parse_lfm2_test_json(lfm2_hf_config());
  EXPECT_EQ(c.family, ModelFamily::Lfm2);
  EXPECT_EQ(c.hybrid.pattern, "CC*C*C");
  EXPECT_EQ(c.hybrid.attention.head_dim, 16);
  EXPECT_DOUBLE_EQ(c.hybrid.attention.scale, 0.25);
  EXPECT_DOUBLE_EQ(c.hybrid.attention.rope_theta, 1e6);
  EXPECT_EQ(c.lfm2.conv_kernel, 3);
  EXPECT_TRUE(c.tie_embeddings);
  EXPECT_EQ(c.hybrid.mlp.width, 192);  // int(2 * 200 / 3) = 133, rounded up to 64
  // LFM2-350M's and LFM2-1.2B's released widths.
  json j = lfm2_hf_config();
  j["block_ff_dim"] = 6656;
  j["block_multiple_of"] = 256;
  EXPECT_EQ(parse_lfm2_test_json(j).hybrid.mlp.width, 4608);
  j["block_ff_dim"] = 12288;
  j["intermediate_size"] = 8192;  // block_ff_dim wins
  EXPECT_EQ(parse_lfm2_test_json(j).hybrid.mlp.width, 8192);
  j["block_auto_adjust_ff_dim"] = false;
  j["block_ff_dim"] = 10752;
  EXPECT_EQ(parse_lfm2_test_json(j).hybrid.mlp.width, 10752);
}

TEST(Lfm2Config, AliasesResolveAsLfm2ConfigDoes) {
  json j = lfm2_hf_config();
  j.erase("layer_types");
  j["full_attn_idxs"] = {1, 5};
  j["theta"] = 5e5;
  j["rope_theta"] = 1e4;
  j["tie_embedding"] = false;
  j["tie_word_embeddings"] = true;
  ModelConfig c = parse_lfm2_test_json(j);
  EXPECT_EQ(c.hybrid.pattern, "C*CCC*");
  EXPECT_DOUBLE_EQ(c.hybrid.attention.rope_theta, 5e5);
  EXPECT_FALSE(c.tie_embeddings);
  j.erase("full_attn_idxs");
  j.erase("theta");
  j["rope_parameters"] = {{"rope_type", "default"}, {"rope_theta", 1e7}};
  c = parse_lfm2_test_json(j);
  EXPECT_EQ(c.hybrid.pattern, "******");  // neither layer_types nor full_attn_idxs: all attention
  EXPECT_DOUBLE_EQ(c.hybrid.attention.rope_theta, 1e7);
}

TEST(Lfm2Config, RefusesWhatItCannotRunNamingTheKey) {
  const auto refused = [](const char* key, const json& value, const std::string& expected) {
    json j = lfm2_hf_config();
    j[key] = value;
    const std::string message = lfm2_config_error(j);
    EXPECT_NE(message.find(expected), std::string::npos) << key << ": " << message;
  };
  refused("conv_bias", true, "conv_bias");
  refused("layer_types", json{"conv", "mamba", "conv", "conv", "conv", "conv"}, "layer_types");
  refused("layer_types", json{"conv"}, "layer_types");
  refused("num_key_value_heads", 3, "num_key_value_heads");
  refused("conv_L_cache", 99, "conv_L_cache");
  refused("rope_parameters", json{{"rope_type", "yarn"}}, "rope_parameters.rope_type");
  json idxs = lfm2_hf_config();
  idxs.erase("layer_types");
  idxs["full_attn_idxs"] = {9};
  EXPECT_NE(lfm2_config_error(idxs).find("full_attn_idxs"), std::string::npos);
  json moe = lfm2_hf_config();
  moe["model_type"] = "lfm2_moe";
  moe["num_experts"] = 4;
  moe["num_experts_per_tok"] = 5;
  EXPECT_NE(lfm2_config_error(moe).find("num_experts_per_tok"), std::string::npos);
}

TEST(Lfm2Config, MakeModelsExamplesAreValidConfigsOfBothFamilies) {
  // make-model --arch lfm2 / lfm2-moe start from these (then --set).
  const Family* dense = family_by_name("lfm2");
  const Family* moe = family_by_name("lfm2-moe");
  ASSERT_NE(dense, nullptr);
  ASSERT_NE(moe, nullptr);
  const ModelConfig d = parse_lfm2_test_json(dense->example(64, 4, 300));
  EXPECT_EQ(d.family, ModelFamily::Lfm2);
  EXPECT_EQ(d.hybrid.pattern, "CC*C");
  EXPECT_EQ(d.hybrid.mlp.width, 128);  // 3 x 64, times 2/3, a multiple of 16
  const ModelConfig m = parse_lfm2_test_json(moe->example(64, 4, 300));
  EXPECT_EQ(m.family, ModelFamily::Lfm2Moe);
  EXPECT_EQ(m.hybrid.moe.scoring, MoeScoring::SigmoidBias);
  std::string kinds;
  for (const BlockSpec& b : m.blocks())
    kinds += b.kind == BlockKind::ShortConv       ? 'C'
             : b.kind == BlockKind::Lfm2Attention ? 'A'
             : b.kind == BlockKind::Lfm2Mlp       ? 'f'
                                                  : 'e';
  EXPECT_EQ(kinds, "CfCeAeCe");  // num_dense_layers 1: the first layer's feed-forward is dense
  // The config make-model writes is read back the same.
  const ModelConfig again = parse_lfm2_test_json(model_config_to_hf_json(d));
  EXPECT_EQ(again.hybrid.mlp.width, d.hybrid.mlp.width);
  EXPECT_EQ(again.hybrid.pattern, d.hybrid.pattern);
  EXPECT_EQ(again.hybrid.attention.n_kv_heads, d.hybrid.attention.n_kv_heads);
}

}  // namespace
}  // namespace mb

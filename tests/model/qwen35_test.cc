// SPDX-License-Identifier: MIT
// Qwen3.5 (../shared/specs/gated-deltanet.md): the config as transformers reads it (nested and flat
// forms, layer_types or the interval, rope_parameters or the older keys, refusals naming the key),
// and the bitwise contract on make-model checkpoints with two key heads and four value heads (so
// the value-to-key head mapping matters): a prefill equals its decode steps (logits and every state
// part: the conv history, the GDN matrix state, the KV cache), the thread count, the round size
// (the KV and matrix-state handoff between rounds) and the batch change no bit, in f32, bf16 and
// Q8_0 / Q4_K weights, and a state continues exactly after a fork or a restore. Every comparison is
// memcmp. The golden logits of an 8-layer Qwen3.5 are in golden_test.cc.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>

#include "common/model_fixture.h"
#include "common/test_util.h"
#include "core/error.h"
#include "model/family.h"
#include "model/model.h"

namespace mb {
namespace qwen35_test {
namespace {

using nlohmann::json;
using test::same_bits;

// make-model's example (2 key heads / 4 value heads of 16, attention heads of 16 rotating 4
// channels) with `pattern` of 'G' (Gated DeltaNet) and '*' (gated attention).
json example_json(const std::string& pattern, int64_t d_model, int64_t vocab) {
  json hf = family_by_name("qwen3.5")->example(d_model, static_cast<int64_t>(pattern.size()), vocab);
  json types = json::array();
  for (const char layer : pattern) types.push_back(layer == 'G' ? "linear_attention" : "full_attention");
  hf["layer_types"] = types;
  return hf;
}

ModelConfig config_of(const std::string& pattern, int64_t d_model, int64_t vocab = 131) {
  return parse_model_config(example_json(pattern, d_model, vocab), "qwen3.5 test");
}

struct Qwen35Shape {
  std::string name;
  MakeModelOptions options;
  std::optional<DType> load_dtype;
  int64_t max_length;
};

std::vector<Qwen35Shape> qwen35_shapes() {
  MakeModelOptions a;
  a.config = config_of("GG*G*", 48);
  a.seed = 61;
  MakeModelOptions b;
  b.config = config_of("G*G", 32);
  b.dtype = DType::BF16;
  b.seed = 62;
  MakeModelOptions c;
  c.config = config_of("G*", 64);
  c.seed = 63;
  MakeModelOptions d;
  d.config = config_of("*G", 256);
  d.seed = 64;
  return {{"qwen35_f32", a, std::nullopt, 200},
          {"qwen35_bf16", b, std::nullopt, 100},
          {"qwen35_q8_0", c, DType::Q8_0, 100},
          {"qwen35_q4_k", d, DType::Q4_K, 40}};
}

const Model& qwen35_model_for(const Qwen35Shape& shape) {
  static std::map<std::string, std::unique_ptr<Model>> models;
  auto it = models.find(shape.name);
  if (it == models.end()) {
    LoadOptions load;
    load.weight_dtype = shape.load_dtype;
    it = models.emplace(shape.name, Model::load(test::write_model(shape.options, "qwen35"), load)).first;
  }
  return *it->second;
}

class Qwen35Exactness : public ::testing::TestWithParam<Qwen35Shape> {};

TEST_P(Qwen35Exactness, PrefillEqualsDecodeStepsForEveryLength) {
  test::expect_prefill_equals_steps_for_every_length(qwen35_model_for(GetParam()), GetParam().max_length);
}

TEST_P(Qwen35Exactness, ThreadCountsRoundSizesAndInstructionSetsChangeNoBit) {
  const Model& model = qwen35_model_for(GetParam());
  test::expect_threads_rounds_and_isas_change_no_bit(
      model, test::random_tokens(120, model.config().vocab_size, 4), {0, 1, 2, 7, 64});
}

TEST_P(Qwen35Exactness, EachSequenceOfABatchEqualsItAlone) {
  const Model& model = qwen35_model_for(GetParam());
  const std::vector<size_t> lengths = {1, 5, 17, 70, 2, 3};
  std::vector<std::vector<int32_t>> prompts;
  for (size_t i = 0; i < lengths.size(); ++i)
    prompts.push_back(test::random_tokens(lengths[i], model.config().vocab_size, 30 + i));
  test::expect_batch_equals_each_alone(
      model, prompts, {OutputKind::LogitsLast, OutputKind::LogitsAll, OutputKind::HiddenMean}, {0, 4});
  test::expect_batched_steps_equal_solo(model, ComputeContext{2, best_isa()}, prompts.size(), 10);
}

TEST_P(Qwen35Exactness, PrefillThenDecodeContinuesLikeDecodeAllTheWay) {
  test::expect_prefill_then_decode_equals_decode(qwen35_model_for(GetParam()), ComputeContext{2, best_isa()},
                                                 {OutputKind::None, 8});
}

TEST_P(Qwen35Exactness, AStateHoldsConvAndMatrixStatesAndTheKvCacheAndContinuesAfterAForkOrARestore) {
  const Model& model = qwen35_model_for(GetParam());
  const ComputeContext ctx{2, best_isa()};
  const ModelConfig& c = model.config();
  const auto tokens = test::random_tokens(50, c.vocab_size, 9);
  const std::vector<int32_t> first(tokens.begin(), tokens.begin() + 29),
      rest(tokens.begin() + 29, tokens.end());
  SequenceState state = model.new_state();
  test::prefill(model, ctx, first, state, {OutputKind::None, 0});
  // Each GDN layer holds K - 1 = 3 columns of the conv width and the [nv, dv, dk] matrix state;
  // each attention layer 29 positions of keys and values.
  const Qwen35Config& q = c.qwen35;
  const int64_t gdn = std::count(c.hybrid.pattern.begin(), c.hybrid.pattern.end(), kGatedDeltaNetLayer);
  const int64_t attention = static_cast<int64_t>(c.hybrid.pattern.size()) - gdn;
  const StateShape shape = model.state_layout().shape();
  EXPECT_EQ(shape.fixed_floats, gdn * (3 * q.conv_width() + q.n_value_heads * q.value_dim * q.key_dim));
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

INSTANTIATE_TEST_SUITE_P(Qwen35, Qwen35Exactness, ::testing::ValuesIn(qwen35_shapes()),
                         [](const auto& info) { return info.param.name; });

TEST(Qwen35Config, NestedAndFlatFormsReadTheSameTextModel) {
  const json flat = example_json("GGG*GGG*", 64, 256);
  json nested = {{"model_type", "qwen3_5"},
                 {"tie_word_embeddings", true},
                 {"vision_config", {{"depth", 1}}},
                 {"text_config", flat}};
  nested["text_config"]["tie_word_embeddings"] = false;  // the top level's wins
  const ModelConfig a = parse_model_config(flat, "flat");
  const ModelConfig b = parse_model_config(nested, "nested");
  EXPECT_EQ(a.qwen35.prefix, "model.");
  EXPECT_EQ(b.qwen35.prefix, "model.language_model.");
  EXPECT_FALSE(a.tie_embeddings);
  EXPECT_TRUE(b.tie_embeddings);
  EXPECT_EQ(a.hybrid.pattern, "GGG*GGG*");
  EXPECT_EQ(b.hybrid.pattern, a.hybrid.pattern);
  EXPECT_EQ(a.hybrid.attention.head_dim, 16);  // explicit, not hidden / heads
  EXPECT_EQ(a.hybrid.attention.rotary_dims(), 4);
  EXPECT_DOUBLE_EQ(a.hybrid.attention.rope_theta, 1e7);
}

TEST(Qwen35Config, LayerTypesOrTheIntervalAndRopeParametersOrTheOlderKeys) {
  json hf = example_json("GGG*GGG*", 64, 256);
  hf.erase("layer_types");
  hf["full_attention_interval"] = 3;
  hf["rope_parameters"] = {{"rope_type", "default"}, {"rope_theta", 5e6}, {"partial_rotary_factor", 0.5}};
  ModelConfig c = parse_model_config(hf, "interval");
  EXPECT_EQ(c.hybrid.pattern, "GG*GG*GG");
  EXPECT_DOUBLE_EQ(c.hybrid.attention.rope_theta, 5e6);
  EXPECT_EQ(c.hybrid.attention.rotary_dims(), 8);
  hf.erase("rope_parameters");
  hf["rope_theta"] = 1e4;
  hf["rope_scaling"] = {{"type", "mrope"}, {"mrope_section", {1, 1, 0}}};
  c = parse_model_config(hf, "legacy");
  EXPECT_DOUBLE_EQ(c.hybrid.attention.rope_theta, 1e4);
  EXPECT_EQ(c.hybrid.attention.rotary_dims(), 4);
}

TEST(Qwen35Config, UnsupportedSettingsAreRefusedNamingTheKey) {
  const auto refused = [](json hf, const std::string& key) {
    try {
      parse_model_config(hf, "refused");
      ADD_FAILURE() << key << " accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(key), std::string::npos) << e.what();
    }
  };
  const json base = example_json("GGG*", 64, 256);
  json hf = base;
  hf["rope_parameters"] = {{"rope_type", "yarn"}, {"factor", 4.0}};
  refused(hf, "rope_type");
  hf = base;
  hf["attn_output_gate"] = false;
  refused(hf, "attn_output_gate");
  hf = base;
  hf["linear_num_value_heads"] = 3;
  refused(hf, "linear_num_value_heads");
  hf = base;
  hf["layer_types"][1] = "mamba";
  refused(hf, "layer_types");
  hf = base;
  hf.erase("head_dim");
  refused(hf, "head_dim");
}

}  // namespace
}  // namespace qwen35_test
}  // namespace mb

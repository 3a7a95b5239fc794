// Hybrid configs as their checkpoints ship them (the goldens' config.json files) parse to the
// blocks and sizes they describe; configs the engine cannot honour (mixture-of-experts layers,
// RoPE, other activations, inconsistent layer lists and head counts) are refused with a message
// naming the key; make-model writes hybrids that load back with the sizes asked for.
#include <gtest/gtest.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "common/hybrid_configs.h"
#include "common/model_fixture.h"
#include "common/test_util.h"
#include "core/error.h"
#include "core/json_text.h"
#include "io/mapped_file.h"
#include "model/blocks/block.h"

namespace mb {
namespace {

using nlohmann::json;

json golden_config(const std::string& name) {
  const std::string path = std::string(MB_TEST_DATA_DIR) + "/goldens/" + name + "/config.json";
  return json::parse(read_text_file(path));
}

template <class Fn>
void expect_error(Fn&& fn, const std::vector<std::string>& fragments) {
  try {
    fn();
    FAIL() << "accepted a bad config";
  } catch (const Error& e) {
    for (const auto& fragment : fragments)
      EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what() << " lacks " << fragment;
  }
}

std::string kinds(const ModelConfig& c) {
  std::string out;
  for (const BlockSpec& b : c.blocks())
    out += b.kind == BlockKind::Mamba2Mixer ? 'M' : b.kind == BlockKind::Attention ? '*' : '-';
  return out;
}

TEST(HybridConfig, GraniteLayersAreAMixerThenTheSharedMlpWithEveryMultiplier) {
  const ModelConfig c = parse_model_config(golden_config("granite-4.0-h-dense"), "granite");
  EXPECT_EQ(c.family, ModelFamily::GraniteHybrid);
  EXPECT_EQ(kinds(c), "M-*-M-M-*-");
  EXPECT_EQ(c.blocks()[1].tensor("input_linear.weight"), "model.layers.0.shared_mlp.input_linear.weight");
  EXPECT_EQ(c.blocks()[2].norm(), "model.layers.1.input_layernorm.weight");
  EXPECT_EQ(c.hybrid.attention.n_kv_heads, 2);
  EXPECT_EQ(c.hybrid.attention.head_dim, 16);
  EXPECT_DOUBLE_EQ(c.hybrid.attention.scale, 0.0625);
  EXPECT_DOUBLE_EQ(c.hybrid.embedding_multiplier, 12.0);
  EXPECT_DOUBLE_EQ(c.hybrid.residual_multiplier, 0.22);
  EXPECT_DOUBLE_EQ(c.hybrid.logits_scaling, 3.0);
  EXPECT_EQ(c.hybrid.mlp.width, 96);
  EXPECT_EQ(c.ssm.n_heads(), 8);
  EXPECT_TRUE(c.tie_embeddings);
}

TEST(HybridConfig, NemotronLayersAreOneBlockEachWithTheirOwnSizes) {
  const ModelConfig c = parse_model_config(golden_config("nemotron-h-dense"), "nemotron");
  EXPECT_EQ(c.family, ModelFamily::NemotronH);
  EXPECT_EQ(kinds(c), "M-M*-M");
  EXPECT_EQ(c.ssm.d_inner, 192);  // mamba_num_heads x mamba_head_dim, not expand x hidden_size
  EXPECT_EQ(c.ssm.ngroups, 4);
  EXPECT_EQ(c.hybrid.attention.head_dim, 24);  // not hidden / heads
  EXPECT_EQ(c.hybrid.mlp.activation, Activation::ReluSquared);
  EXPECT_EQ(c.ssm.dt_limit_min, 0.0);  // time_step_min is not a clamp at inference
  EXPECT_FALSE(c.tie_embeddings);
  // The list spellings of transformers' newer configs.
  json listed = golden_config("nemotron-h-dense");
  listed.erase("hybrid_override_pattern");
  listed["layers_block_type"] = {"linear_attention", "mlp", "mamba", "full_attention", "mlp", "mamba"};
  EXPECT_EQ(kinds(parse_model_config(listed, "listed")), "M-M*-M");
}

TEST(HybridConfig, WhatTheEngineCannotRunIsRefusedNamingTheKey) {
  const json granite = golden_config("granite-4.0-h-dense");
  const json nemotron = golden_config("nemotron-h-dense");
  const auto with = [](json j, const std::string& key, const json& value) {
    j[key] = value;
    return j;
  };
  expect_error([&] { parse_model_config(with(granite, "num_local_experts", 8), "g"); },
               {"num_local_experts", "mixture-of-experts"});
  expect_error([&] { parse_model_config(with(granite, "position_embedding_type", "rope"), "g"); },
               {"position_embedding_type", "rope"});
  expect_error(
      [&] {
        parse_model_config(with(granite, "layer_types", json{"mamba", "attention"}), "g");
      },
      {"layer_types", "5"});
  expect_error(
      [&] {
        parse_model_config(with(granite, "layer_types", json{"mamba", "mlp", "mamba", "mamba", "mamba"}),
                           "g");
      },
      {"layer_types[1]"});
  expect_error([&] { parse_model_config(with(granite, "num_key_value_heads", 3), "g"); },
               {"num_key_value_heads", "3"});
  expect_error([&] { parse_model_config(with(granite, "mamba_d_head", 24), "g"); }, {"mamba_d_head"});
  expect_error([&] { parse_model_config(with(nemotron, "hybrid_override_pattern", "M-E*"), "n"); },
               {"layer 2", "mixture-of-experts"});
  expect_error([&] { parse_model_config(with(nemotron, "hybrid_override_pattern", "M-x"), "n"); }, {"'x'"});
  expect_error([&] { parse_model_config(with(nemotron, "num_hidden_layers", 7), "n"); },
               {"num_hidden_layers", "6 layers"});
  expect_error([&] { parse_model_config(with(nemotron, "mlp_hidden_act", "gelu"), "n"); },
               {"mlp_hidden_act"});
  expect_error([&] { parse_model_config(with(nemotron, "mamba_num_heads", 5), "n"); }, {"group count"});
}

TEST(HybridConfig, MakeModelWritesHybridsThatLoadWithTheSizesAskedFor) {
  for (const ModelConfig& config : {test::granite_config("M**M"), test::nemotron_config("-*MM")}) {
    MakeModelOptions o;
    o.config = config;
    o.seed = 5;
    const auto model = Model::load(test::write_model(o, "hybrid_cfg"));
    const ModelConfig& c = model->config();
    EXPECT_EQ(c.family, config.family);
    EXPECT_EQ(c.hybrid.pattern, config.hybrid.pattern);
    EXPECT_EQ(c.ssm.d_inner, config.ssm.d_inner);
    EXPECT_EQ(c.hybrid.attention.head_dim, config.hybrid.attention.head_dim);
    EXPECT_EQ(model->blocks().size(), c.blocks().size());
    // One state layer per block; the attention blocks' two parts grow.
    EXPECT_EQ(model->state_layout().n_layers(), static_cast<int64_t>(c.blocks().size()));
    const auto attention = std::count(c.hybrid.pattern.begin(), c.hybrid.pattern.end(), '*');
    EXPECT_EQ(model->state_layout().shape().growing.size(), static_cast<size_t>(2 * attention));
    // The MLP blocks keep no state and say so.
    EXPECT_NE(model->state_layout().describe().find(": no state"), std::string::npos)
        << model->state_layout().describe();
  }
}

}  // namespace
}  // namespace mb

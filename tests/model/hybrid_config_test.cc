// SPDX-License-Identifier: MIT
// Hybrid configs as their checkpoints ship them (the goldens' config.json files) parse to the
// blocks and sizes they describe, and so do the mixture-of-experts configs of the released models
// (Granite-4.0-H-Tiny, Nemotron-3-Nano-30B-A3B); configs the engine cannot honour (grouped or
// latent expert routing, scaled or partial RoPE, other activations, inconsistent layer lists and
// head counts) are refused with a message naming the key; the all-attention RoPE Granite-4.0
// configs parse; make-model writes hybrids that load back with the sizes asked for.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "common/hybrid_configs.h"
#include "common/model_fixture.h"
#include "common/test_util.h"
#include "core/error.h"
#include "core/json_text.h"
#include "io/mapped_file.h"
#include "io/safetensors.h"
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
    out += b.kind == BlockKind::Mamba2Mixer ? 'M'
           : b.kind == BlockKind::Attention ? '*'
           : b.kind == BlockKind::Moe       ? 'E'
                                            : '-';
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
  // Experts need to know how many of them a token chooses (the golden config says 0).
  expect_error([&] { parse_model_config(with(granite, "num_local_experts", 8), "g"); },
               {"num_experts_per_tok"});
  expect_error([&] { parse_model_config(with(granite, "num_local_experts", -1), "g"); },
               {"num_local_experts"});
  json granite_moe = with(granite, "num_local_experts", 8);
  granite_moe["num_experts_per_tok"] = 9;
  expect_error([&] { parse_model_config(granite_moe, "g"); }, {"num_experts_per_tok = 9", "8 experts"});
  expect_error([&] { parse_model_config(with(granite, "position_embedding_type", "alibi"), "g"); },
               {"position_embedding_type", "alibi"});
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
  const json nemotron_moe = with(nemotron, "hybrid_override_pattern", "M-E*EM");
  expect_error([&] { parse_model_config(with(nemotron_moe, "n_group", 2), "n"); }, {"n_group", "topk_group"});
  // LatentMoE's width is read (Nemotron-3-Super); null means none, as in the models without it.
  EXPECT_EQ(parse_model_config(with(nemotron_moe, "moe_latent_size", 1024), "n").hybrid.moe.latent, 1024);
  EXPECT_EQ(parse_model_config(with(nemotron_moe, "moe_latent_size", nullptr), "n").hybrid.moe.latent, 0);
  expect_error([&] { parse_model_config(with(nemotron_moe, "moe_latent_size", 0), "n"); },
               {"moe_latent_size"});
  expect_error([&] { parse_model_config(with(nemotron_moe, "n_shared_experts", 2), "n"); },
               {"n_shared_experts"});
  expect_error([&] { parse_model_config(with(nemotron_moe, "num_experts_per_tok", 9), "n"); },
               {"num_experts_per_tok"});
  // Without an E layer the expert keys are not read.
  EXPECT_NO_THROW(parse_model_config(with(nemotron, "moe_latent_size", 1024), "n"));
  expect_error([&] { parse_model_config(with(nemotron, "hybrid_override_pattern", "M-x"), "n"); }, {"'x'"});
  expect_error([&] { parse_model_config(with(nemotron, "num_hidden_layers", 7), "n"); },
               {"num_hidden_layers", "6 layers"});
  expect_error([&] { parse_model_config(with(nemotron, "mlp_hidden_act", "gelu"), "n"); },
               {"mlp_hidden_act"});
  expect_error([&] { parse_model_config(with(nemotron, "mamba_num_heads", 5), "n"); }, {"group count"});
}

// Nemotron-3-Nano-30B-A3B's config.json (the keys of ../shared/specs/hybrids.md section 3.2).
json nemotron_3_nano_30b() {
  return json::parse(R"({
    "architectures": ["NemotronHForCausalLM"], "model_type": "nemotron_h",
    "hidden_size": 2688, "num_hidden_layers": 52, "vocab_size": 131072, "tie_word_embeddings": false,
    "hybrid_override_pattern": "MEMEM*EMEMEM*EMEMEM*EMEMEM*EMEMEM*EMEMEMEM*EMEMEMEME",
    "num_attention_heads": 32, "num_key_value_heads": 2, "head_dim": 128,
    "rope_theta": 10000, "partial_rotary_factor": 1.0,
    "mamba_num_heads": 64, "mamba_head_dim": 64, "n_groups": 8, "ssm_state_size": 128, "conv_kernel": 4,
    "expand": 2, "chunk_size": 128, "use_conv_bias": true, "mamba_proj_bias": false, "mamba_hidden_act": "silu",
    "mamba_ssm_cache_dtype": "float32", "time_step_min": 0.001, "time_step_max": 0.1,
    "time_step_limit": [0.0, 1e30],
    "n_routed_experts": 128, "num_experts_per_tok": 6, "moe_intermediate_size": 1856,
    "n_shared_experts": 1, "moe_shared_expert_intermediate_size": 3712, "norm_topk_prob": true,
    "routed_scaling_factor": 2.5, "n_group": 1, "topk_group": 1,
    "intermediate_size": 1856, "mlp_hidden_act": "relu2", "mlp_bias": false, "attention_bias": false,
    "layer_norm_epsilon": 1e-05, "norm_eps": 1e-05, "residual_in_fp32": false,
    "max_position_embeddings": 262144})");
}

// Granite-4.0-H-Tiny's config.json (section 2.2; the multipliers are marked uncertain there).
json granite_h_tiny() {
  return json::parse(R"({
    "architectures": ["GraniteMoeHybridForCausalLM"], "model_type": "granitemoehybrid",
    "hidden_size": 1536, "num_hidden_layers": 40, "num_attention_heads": 12, "num_key_value_heads": 4,
    "layer_types": ["mamba", "mamba", "mamba", "mamba", "mamba", "attention", "mamba", "mamba", "mamba",
                    "mamba", "mamba", "mamba", "mamba", "mamba", "mamba", "attention", "mamba", "mamba",
                    "mamba", "mamba", "mamba", "mamba", "mamba", "mamba", "mamba", "attention", "mamba",
                    "mamba", "mamba", "mamba", "mamba", "mamba", "mamba", "mamba", "mamba", "attention",
                    "mamba", "mamba", "mamba", "mamba"],
    "position_embedding_type": "nope", "mamba_n_heads": 48, "mamba_d_head": 64, "mamba_d_state": 128,
    "mamba_n_groups": 1, "mamba_d_conv": 4, "mamba_expand": 2, "mamba_conv_bias": true,
    "mamba_proj_bias": false, "mamba_chunk_size": 256,
    "num_local_experts": 64, "num_experts_per_tok": 6, "intermediate_size": 512,
    "shared_intermediate_size": 1024, "embedding_multiplier": 12, "residual_multiplier": 0.22,
    "attention_multiplier": 0.0078125, "logits_scaling": 6, "rms_norm_eps": 1e-5, "hidden_act": "silu",
    "tie_word_embeddings": true, "vocab_size": 100352, "max_position_embeddings": 131072,
    "router_aux_loss_coef": 0.0, "rope_theta": 10000})");
}

// granite-4.0-micro's config.json as far as the issue and ../shared/specs/hybrids.md (section 2.1)
// give it: 40 attention layers, hidden 2560, 40 / 8 heads, the shared MLP 8192 wide, no experts,
// RoPE at base 1e7. The multipliers are H-Micro's (section 2.2), and the mamba_* keys are
// H-Micro's too, which do not fit hidden 2560 (64 x 64 != 2 x 2560): without Mamba layers they
// describe nothing and are not read.
json granite_micro() {
  json layer_types = json::array();
  for (int l = 0; l < 40; ++l) layer_types.push_back("attention");
  json c = json::parse(R"({
    "architectures": ["GraniteMoeHybridForCausalLM"], "model_type": "granitemoehybrid",
    "hidden_size": 2560, "num_hidden_layers": 40, "num_attention_heads": 40, "num_key_value_heads": 8,
    "position_embedding_type": "rope", "rope_theta": 10000000, "rope_scaling": null,
    "mamba_n_heads": 64, "mamba_d_head": 64, "mamba_d_state": 128, "mamba_n_groups": 1, "mamba_d_conv": 4,
    "mamba_expand": 2, "num_local_experts": 0, "num_experts_per_tok": 0, "intermediate_size": 8192,
    "shared_intermediate_size": 8192, "embedding_multiplier": 12, "residual_multiplier": 0.22,
    "attention_multiplier": 0.015625, "logits_scaling": 10, "rms_norm_eps": 1e-5, "hidden_act": "silu",
    "tie_word_embeddings": true, "vocab_size": 100352, "max_position_embeddings": 131072})");
  c["layer_types"] = layer_types;
  return c;
}

TEST(HybridConfig, AllAttentionRopeGraniteConfigsParseAndScaledOrPartialRopeIsRefused) {
  const ModelConfig c = parse_model_config(granite_micro(), "granite-4.0-micro");
  EXPECT_EQ(c.family, ModelFamily::GraniteHybrid);
  EXPECT_EQ(c.hybrid.pattern, std::string(40, '*'));
  std::string expected;
  for (int l = 0; l < 40; ++l) expected += "*-";
  EXPECT_EQ(kinds(c), expected);  // each layer's attention, then its shared MLP
  EXPECT_EQ(c.hybrid.attention.n_heads, 40);
  EXPECT_EQ(c.hybrid.attention.n_kv_heads, 8);
  EXPECT_EQ(c.hybrid.attention.head_dim, 64);
  EXPECT_DOUBLE_EQ(c.hybrid.attention.rope_theta, 1e7);
  EXPECT_DOUBLE_EQ(c.hybrid.attention.scale, 0.015625);
  EXPECT_EQ(c.hybrid.mlp.width, 8192);
  EXPECT_EQ(c.hybrid.moe.n_experts, 0);
  // The NoPE hybrids carry rope_theta too, and ignore it.
  EXPECT_EQ(parse_model_config(golden_config("granite-4.0-h-dense"), "g").hybrid.attention.rope_theta, 0.0);
  EXPECT_EQ(parse_model_config(granite_h_tiny(), "t").hybrid.attention.rope_theta, 0.0);

  const auto with = [](json j, const std::string& key, const json& value) {
    j[key] = value;
    return j;
  };
  json bare = granite_micro();
  bare.erase("rope_theta");
  EXPECT_DOUBLE_EQ(parse_model_config(bare, "m").hybrid.attention.rope_theta, 10000.0);  // the class default
  // transformers' newer spelling.
  json parameters = with(bare, "rope_parameters", {{"rope_type", "default"}, {"rope_theta", 5e6}});
  EXPECT_DOUBLE_EQ(parse_model_config(parameters, "m").hybrid.attention.rope_theta, 5e6);
  EXPECT_DOUBLE_EQ(parse_model_config(with(granite_micro(), "partial_rotary_factor", 1.0), "m")
                       .hybrid.attention.rope_theta,
                   1e7);
  // A Granite-4.0-H with RoPE (Bamba's form) parses too.
  const ModelConfig mixed =
      parse_model_config(with(golden_config("granite-4.0-h-dense"), "position_embedding_type", "rope"), "g");
  EXPECT_DOUBLE_EQ(mixed.hybrid.attention.rope_theta, 10000.0);

  const json micro = granite_micro();
  expect_error(
      [&] {
        parse_model_config(with(micro, "rope_scaling", {{"type", "linear"}, {"factor", 2.0}}), "m");
      },
      {"rope_scaling", "linear"});
  expect_error([&] { parse_model_config(with(micro, "partial_rotary_factor", 0.5), "m"); },
               {"partial_rotary_factor", "0.5"});
  expect_error(
      [&] {
        parse_model_config(with(micro, "rope_parameters", {{"rope_type", "yarn"}}), "m");
      },
      {"rope_parameters.rope_type", "yarn"});
  expect_error(
      [&] {
        parse_model_config(with(micro, "rope_parameters", {{"factor", 4.0}}), "m");
      },
      {"rope_parameters.factor"});
  expect_error(
      [&] {
        parse_model_config(with(micro, "rope_parameters", {{"partial_rotary_factor", 0.25}}), "m");
      },
      {"rope_parameters.partial_rotary_factor"});
  expect_error([&] { parse_model_config(with(micro, "rope_theta", -1), "m"); }, {"rope_theta"});
  // RoPE pairs the two halves of a head: an odd head size cannot be rotated.
  expect_error([&] { parse_model_config(with(micro, "num_attention_heads", 512), "m"); }, {"even", "5"});
}

TEST(HybridConfig, TheReleasedMixtureOfExpertsConfigsParse) {
  const ModelConfig n = parse_model_config(nemotron_3_nano_30b(), "nemotron-3-nano-30b");
  EXPECT_EQ(n.n_layer, 52);
  EXPECT_EQ(std::count(n.hybrid.pattern.begin(), n.hybrid.pattern.end(), 'E'), 23);
  EXPECT_EQ(kinds(n).substr(0, 6), "MEMEM*");
  EXPECT_EQ(n.hybrid.moe.n_experts, 128);
  EXPECT_EQ(n.hybrid.moe.top_k, 6);
  EXPECT_EQ(n.hybrid.moe.width, 1856);
  EXPECT_EQ(n.hybrid.moe.shared_width, 3712);
  EXPECT_EQ(n.hybrid.moe.scoring, MoeScoring::SigmoidBias);
  EXPECT_TRUE(n.hybrid.moe.normalize);
  EXPECT_DOUBLE_EQ(n.hybrid.moe.scale, 2.5);
  EXPECT_EQ(n.ssm.d_inner, 4096);
  EXPECT_EQ(n.blocks()[1].tensor("experts.{e}.up_proj.weight"),
            "backbone.layers.1.mixer.experts.{e}.up_proj.weight");
  // num_local_experts is transformers' other name for n_routed_experts.
  json aliased = nemotron_3_nano_30b();
  aliased.erase("n_routed_experts");
  aliased["num_local_experts"] = 64;
  EXPECT_EQ(parse_model_config(aliased, "aliased").hybrid.moe.n_experts, 64);

  const ModelConfig g = parse_model_config(granite_h_tiny(), "granite-4.0-h-tiny");
  EXPECT_EQ(g.n_layer, 40);
  EXPECT_EQ(g.blocks().size(), 80u);  // each layer's mixer, then its shared MLP and experts
  EXPECT_EQ(g.blocks()[1].kind, BlockKind::Moe);
  EXPECT_EQ(g.blocks()[1].tensor("router.layer.weight"),
            "model.layers.0.block_sparse_moe.router.layer.weight");
  EXPECT_EQ(g.blocks()[1].norm(), "model.layers.0.post_attention_layernorm.weight");
  EXPECT_EQ(g.hybrid.moe.n_experts, 64);
  EXPECT_EQ(g.hybrid.moe.top_k, 6);
  EXPECT_EQ(g.hybrid.moe.width, 512);
  EXPECT_EQ(g.hybrid.mlp.width, 1024);
  EXPECT_EQ(g.hybrid.moe.scoring, MoeScoring::SoftmaxTopK);
  EXPECT_FALSE(g.hybrid.moe.normalize);
}

TEST(HybridConfig, MakeModelWritesMixtureOfExpertsConfigsAsTransformersReadsThem) {
  for (const ModelConfig& config :
       {test::granite_moe_config("M*", 5, 2, 20), test::nemotron_moe_config("ME*E")}) {
    const nlohmann::json hf = model_config_to_hf_json(config);
    const ModelConfig back = parse_model_config(hf, "written");
    EXPECT_EQ(back.hybrid.moe.n_experts, config.hybrid.moe.n_experts);
    EXPECT_EQ(back.hybrid.moe.top_k, config.hybrid.moe.top_k);
    EXPECT_EQ(back.hybrid.moe.width, config.hybrid.moe.width);
    EXPECT_EQ(back.hybrid.moe.scoring, config.hybrid.moe.scoring);
    if (config.family == ModelFamily::GraniteHybrid) {
      EXPECT_EQ(hf["num_local_experts"], 5);
      EXPECT_EQ(hf["intermediate_size"], 20);  // each expert's; the shared MLP is shared_intermediate_size
      EXPECT_EQ(hf["shared_intermediate_size"], config.hybrid.mlp.width);
    } else {
      EXPECT_EQ(hf["n_routed_experts"], 9);
      EXPECT_EQ(hf["moe_intermediate_size"], 24);
      EXPECT_EQ(hf["moe_shared_expert_intermediate_size"], 44);
      EXPECT_EQ(hf["n_shared_experts"], 1);
      EXPECT_EQ(hf["norm_topk_prob"], true);
      EXPECT_DOUBLE_EQ(hf["routed_scaling_factor"].get<double>(), 2.5);
      EXPECT_EQ(back.hybrid.moe.shared_width, 44);
    }
    // The folder loads: Nemotron-H's experts as one tensor per expert, Granite's stacked.
    MakeModelOptions o;
    o.config = config;
    o.seed = 6;
    const std::string dir = test::write_model(o, "moe_cfg");
    const TensorSet tensors = TensorSet::open_dir(dir);
    if (config.family == ModelFamily::NemotronH) {
      EXPECT_NE(tensors.find("backbone.layers.1.mixer.experts.8.down_proj.weight"), nullptr);
      EXPECT_NE(tensors.find("backbone.layers.1.mixer.gate.e_score_correction_bias"), nullptr);
      EXPECT_EQ(tensors.find("backbone.layers.1.mixer.experts.up_proj"), nullptr);
    } else {
      ASSERT_NE(tensors.find("model.layers.1.block_sparse_moe.input_linear.weight"), nullptr);
      EXPECT_EQ(tensors.find("model.layers.1.block_sparse_moe.input_linear.weight")->shape,
                (std::vector<int64_t>{5, 40, 40}));
    }
    EXPECT_NO_THROW(Model::load(dir));
  }
}

TEST(HybridConfig, MixtureOfExpertsCheckpointsWithMissingOrMisshapenExpertsAreRefused) {
  MakeModelOptions o;
  o.config = test::nemotron_moe_config("E");
  o.seed = 7;
  const std::string dir = test::write_model(o, "moe_missing");
  // Nemotron-H's experts may also come stacked, as transformers saves its own 3-D parameters.
  {
    const TensorSet tensors = TensorSet::open_dir(dir);
    SafetensorsWriter writer;
    std::vector<float> stacked_up;
    for (const auto& [name, t] : tensors.tensors()) {
      std::vector<float> values(static_cast<size_t>(t.element_count()));
      std::memcpy(values.data(), t.data, values.size() * sizeof(float));
      if (name.find(".experts.") != std::string::npos && name.ends_with("up_proj.weight")) continue;
      writer.add_f32(name, t.shape, values, DType::F32);
    }
    for (int64_t e = 0; e < 9; ++e) {
      const StoredTensor* t =
          tensors.find("backbone.layers.0.mixer.experts." + std::to_string(e) + ".up_proj.weight");
      const auto* f = reinterpret_cast<const float*>(t->data);
      stacked_up.insert(stacked_up.end(), f, f + t->element_count());
    }
    writer.add_f32("backbone.layers.0.mixer.experts.up_proj", {9, 24, 40}, stacked_up, DType::F32);
    const std::string stacked = test::make_temp_dir("moe_stacked");
    writer.write(stacked + "/model.safetensors");
    std::filesystem::copy_file(dir + "/config.json", stacked + "/config.json");
    const auto a = Model::load(dir), b = Model::load(stacked);
    const auto tokens = test::random_tokens(9, a->config().vocab_size, 3);
    const ComputeContext ctx{1, best_isa()};
    SequenceState a_state = a->new_state(), b_state = b->new_state();
    EXPECT_TRUE(test::same_bits(test::prefill(*a, ctx, tokens, a_state, {OutputKind::LogitsAll, 0}),
                                test::prefill(*b, ctx, tokens, b_state, {OutputKind::LogitsAll, 0})));
  }
  {
    const TensorSet tensors = TensorSet::open_dir(dir);
    SafetensorsWriter writer;
    for (const auto& [name, t] : tensors.tensors()) {
      if (name == "backbone.layers.0.mixer.experts.4.down_proj.weight") continue;
      std::vector<float> values(static_cast<size_t>(t.element_count()));
      std::memcpy(values.data(), t.data, values.size() * sizeof(float));
      writer.add_f32(name, t.shape, values, DType::F32);
    }
    const std::string missing = test::make_temp_dir("moe_missing_expert");
    writer.write(missing + "/model.safetensors");
    std::filesystem::copy_file(dir + "/config.json", missing + "/config.json");
    expect_error([&] { Model::load(missing); }, {"backbone.layers.0.mixer.experts.4.down_proj.weight"});
  }
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

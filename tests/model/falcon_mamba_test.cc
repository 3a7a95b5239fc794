// SPDX-License-Identifier: MIT
// FalconMamba's config and identity: the HF falcon_mamba form is read (the real 7B config
// included), a bad mixer_rms_eps is refused naming the key, make-model writes the form back, and
// the mixer norm is part of what makes a checkpoint distinct (fingerprint and logits). Parity
// and the bitwise contract run in the Mamba-1 suites, parameterized over the two variants.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "common/model_fixture.h"
#include "common/test_util.h"
#include "core/error.h"
#include "io/mapped_file.h"
#include "model/config.h"

namespace mb {
namespace {

using nlohmann::json;

// tiiuae/falcon-mamba-7b's config.json as published: it has no mixer_rms_eps (HF's default
// 1e-6 applies) and states expand 16 beside intermediate_size 8192, which HF resolves in favor
// of intermediate_size.
const json& falcon_mamba_7b_config() {
  static const json config = json::parse(R"({
    "_name_or_path": "./", "architectures": ["FalconMambaForCausalLM"], "bos_token_id": 0,
    "conv_kernel": 4, "eos_token_id": 11, "expand": 16, "hidden_act": "silu", "hidden_size": 4096,
    "initializer_range": 0.1, "intermediate_size": 8192, "layer_norm_epsilon": 1e-05,
    "model_type": "falcon_mamba", "num_hidden_layers": 64, "pad_token_id": 11,
    "rescale_prenorm_residual": false, "residual_in_fp32": true, "state_size": 16,
    "tie_word_embeddings": false, "time_step_floor": 0.0001, "time_step_init_scheme": "random",
    "time_step_max": 0.1, "time_step_min": 0.001, "time_step_rank": 256, "time_step_scale": 1.0,
    "torch_dtype": "bfloat16", "transformers_version": "4.43.0.dev0", "use_bias": false,
    "use_cache": true, "use_conv_bias": true, "vocab_size": 65024})");
  return config;
}

std::string error_of(const json& config) {
  try {
    parse_model_config(config, "'config.json'");
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(FalconMambaConfig, ReadsThePublishedSevenBillionConfig) {
  const ModelConfig c = parse_model_config(falcon_mamba_7b_config(), "falcon-mamba-7b");
  EXPECT_EQ(c.arch, Architecture::Mamba1);
  EXPECT_TRUE(c.ssm.mixer_rms_norm);
  EXPECT_EQ(c.ssm.mixer_rms_eps, 1e-6);
  EXPECT_EQ(c.d_model, 4096);
  EXPECT_EQ(c.ssm.d_inner, 8192);
  EXPECT_EQ(c.ssm.expand, 2);
  EXPECT_EQ(c.n_layer, 64);
  EXPECT_EQ(c.ssm.d_state, 16);
  EXPECT_EQ(c.ssm.dt_rank, 256);
  EXPECT_EQ(c.vocab_size, 65024);
  EXPECT_FALSE(c.tie_embeddings);
  EXPECT_EQ(c.norm_eps, 1e-5f);
  EXPECT_EQ(c.eos_token_ids, std::vector<int32_t>{11});
}

TEST(FalconMambaConfig, ReadsAStatedMixerEpsilon) {
  json config = falcon_mamba_7b_config();
  config["mixer_rms_eps"] = 3e-5;
  EXPECT_EQ(parse_model_config(config, "x").ssm.mixer_rms_eps, 3e-5);
}

TEST(FalconMambaConfig, PlainMambaHasNoMixerNormEvenWithTheKey) {
  json config = falcon_mamba_7b_config();
  config["model_type"] = "mamba";
  config["expand"] = 2;
  config["mixer_rms_eps"] = 1e-3;
  EXPECT_FALSE(parse_model_config(config, "x").ssm.mixer_rms_norm);
}

TEST(FalconMambaConfig, BadMixerEpsilonIsRefusedNamingTheKey) {
  for (const json& bad :
       {json("tiny"), json(-1e-6), json(0), json(0.0), json(1.5), json(true), json::array()}) {
    json config = falcon_mamba_7b_config();
    config["mixer_rms_eps"] = bad;
    const std::string message = error_of(config);
    EXPECT_NE(message.find("'mixer_rms_eps'"), std::string::npos) << bad.dump() << ": " << message;
    EXPECT_NE(message.find("config.json"), std::string::npos) << message;
  }
}

TEST(FalconMambaConfig, HfJsonRoundTripsWithTheFalconIdentity) {
  ModelConfig c = test::small_config(40, 3, 77);
  c.ssm.mixer_rms_norm = true;
  c.ssm.mixer_rms_eps = 2e-6;
  const json written = model_config_to_hf_json(c);
  EXPECT_EQ(written["model_type"], "falcon_mamba");
  EXPECT_EQ(written["architectures"], json::array({"FalconMambaForCausalLM"}));
  EXPECT_EQ(written["mixer_rms_eps"], 2e-6);
  const ModelConfig read = parse_model_config(written, "written");
  EXPECT_TRUE(read.ssm.mixer_rms_norm);
  EXPECT_EQ(read.ssm.mixer_rms_eps, 2e-6);
  EXPECT_EQ(read.d_model, 40);
  EXPECT_EQ(read.n_layer, 3);
  EXPECT_EQ(read.ssm.d_inner, 80);

  c.ssm.mixer_rms_norm = false;
  const json plain = model_config_to_hf_json(c);
  EXPECT_EQ(plain["model_type"], "mamba");
  EXPECT_EQ(plain["architectures"], json::array({"MambaForCausalLM"}));
  EXPECT_FALSE(plain.contains("mixer_rms_eps"));
}

TEST(FalconMambaConfig, MakeModelRefusesTheStateSpacesForm) {
  MakeModelOptions o;
  o.config = test::small_config();
  o.config.ssm.mixer_rms_norm = true;
  o.form = ConfigForm::Original;
  try {
    make_model(test::make_temp_dir("falcon_original"), o);
    FAIL() << "FalconMamba written in the state-spaces form";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("Hugging Face form"), std::string::npos) << e.what();
  }
}

// Rewrites a folder's config.json through `edit`.
void edit_config(const std::string& dir, const std::function<void(json&)>& edit) {
  json config = json::parse(read_text_file(dir + "/config.json"));
  edit(config);
  write_file_atomically(dir + "/config.json", config.dump(2));
}

TEST(FalconMambaModel, TheMixerNormChangesTheFingerprintAndTheLogits) {
  MakeModelOptions o;
  o.config = test::small_config(32, 2, 97);
  o.config.ssm.mixer_rms_norm = true;
  o.seed = 5;
  const std::string dir = test::write_model(o, "falcon_identity");
  const auto tokens = test::random_tokens(12, 97, 9);
  const ComputeContext ctx{1, best_isa()};

  auto logits_and_fingerprint = [&]() {
    auto model = Model::load(dir);
    SequenceState state = model->new_state();
    return std::pair{test::step_logits(*model, ctx, tokens, state), model->fingerprint()};
  };
  const auto [falcon_logits, falcon_fingerprint] = logits_and_fingerprint();

  edit_config(dir, [](json& c) { c["mixer_rms_eps"] = 1e-3; });
  const auto [other_eps_logits, other_eps_fingerprint] = logits_and_fingerprint();
  EXPECT_NE(other_eps_fingerprint, falcon_fingerprint);
  EXPECT_FALSE(test::same_bits(other_eps_logits, falcon_logits));

  // The same weights read as plain Mamba-1: the norm is gone, and so is the identity.
  edit_config(dir, [](json& c) {
    c["model_type"] = "mamba";
    c.erase("mixer_rms_eps");
  });
  const auto [mamba_logits, mamba_fingerprint] = logits_and_fingerprint();
  EXPECT_NE(mamba_fingerprint, falcon_fingerprint);
  EXPECT_GT(test::max_abs_diff(mamba_logits, falcon_logits), 1e-3 * test::max_abs(falcon_logits));
}

}  // namespace
}  // namespace mb

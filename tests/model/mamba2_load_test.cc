// SPDX-License-Identifier: MIT
// Mamba-2 configs and checkpoints: the HF form (with Python's bare Infinity in time_step_limit)
// and the state-spaces form parse to the same model; configs that do not fit (head counts,
// groups, hybrid or MLP blocks, unsupported options, bad limits) and checkpoints that do not match
// are refused with a message naming the key or the tensor, never a crash.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "common/mamba2_reference.h"
#include "common/model_fixture.h"
#include "common/tensor_io.h"
#include "common/test_util.h"
#include "core/error.h"
#include "io/mapped_file.h"

namespace mb {
namespace {

using nlohmann::json;

std::string good_model(ConfigForm form) {
  MakeModelOptions o;
  o.config = test::mamba2_config(32, 16, 16, 2, 40);
  o.form = form;
  return test::write_model(o, form == ConfigForm::HuggingFace ? "m2load_hf" : "m2load_original");
}

void write_text(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << text;
}

template <class Fn>
void expect_error(Fn&& fn, const std::vector<std::string>& fragments) {
  try {
    fn();
    FAIL() << "accepted a bad input";
  } catch (const Error& e) {
    for (const auto& fragment : fragments)
      EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what() << " lacks " << fragment;
  }
}

// The published HF form: Python's json writes float('inf') as a bare Infinity.
TEST(Mamba2Config, HuggingFaceFormWithInfinityParses) {
  const std::string dir = test::make_temp_dir("m2cfg");
  write_text(dir + "/config.json", R"({"model_type": "mamba2", "hidden_size": 64, "num_hidden_layers": 2,
    "vocab_size": 256, "num_heads": 8, "head_dim": 16, "n_groups": 2, "state_size": 16, "expand": 2,
    "conv_kernel": 4, "time_step_limit": [0.0, Infinity], "chunk_size": 128, "name": "Infinity and beyond"})");
  const ModelConfig c = load_model_config(dir);
  EXPECT_EQ(c.arch, Architecture::Mamba2);
  EXPECT_EQ(c.ssm.n_heads(), 8);
  EXPECT_EQ(c.ssm.ngroups, 2);
  EXPECT_EQ(c.ssm.chunk_size, 128);
  EXPECT_EQ(c.ssm.dt_limit_min, 0.0);
  EXPECT_TRUE(std::isinf(c.ssm.dt_limit_max));
  EXPECT_FALSE(c.tie_embeddings);  // Mamba2Config's default
}

TEST(Mamba2Config, StateSpacesFormUsesTheModuleDefaults) {
  const json config = json::parse(R"({"d_model": 64, "n_layer": 2, "vocab_size": 50277, "d_intermediate": 0,
    "ssm_cfg": {"layer": "Mamba2"}, "attn_layer_idx": [], "attn_cfg": {}, "rms_norm": true,
    "pad_vocab_size_multiple": 16, "tie_embeddings": true})");
  const ModelConfig c = parse_model_config(config, "config");
  EXPECT_EQ(c.arch, Architecture::Mamba2);
  EXPECT_EQ(c.ssm.d_state, 128);
  EXPECT_EQ(c.ssm.headdim, 64);
  EXPECT_EQ(c.ssm.n_heads(), 2);
  EXPECT_EQ(c.ssm.ngroups, 1);
  EXPECT_EQ(c.ssm.chunk_size, 256);
  EXPECT_EQ(c.vocab_rows, 50288);
  EXPECT_TRUE(c.ssm.gated_norm);
}

TEST(Mamba2Config, ConfigsThatDoNotFitAreRefusedNamingTheKey) {
  const json hf = json::parse(R"({"model_type": "mamba2", "hidden_size": 64, "num_hidden_layers": 2,
    "vocab_size": 256, "num_heads": 8, "head_dim": 16, "n_groups": 2, "state_size": 16})");
  auto with = [&](const char* key, const json& value) {
    json c = hf;
    c[key] = value;
    return c;
  };
  expect_error([&] { parse_model_config(with("num_heads", 6), "c"); }, {"num_heads", "head_dim"});
  expect_error([&] { parse_model_config(with("n_groups", 3), "c"); }, {"group count", "3"});
  expect_error([&] { parse_model_config(with("state_size", 512), "c"); }, {"512", "256"});
  expect_error([&] { parse_model_config(with("time_step_limit", json::array({0.1})), "c"); },
               {"time_step_limit"});
  expect_error(
      [&] {
        parse_model_config(with("time_step_limit", json::array({0.2, 0.1})), "c");
      },
      {"time_step_limit", "min <= max"});
  expect_error(
      [&] {
        parse_model_config(with("time_step_limit", json::array({"x", 1})), "c");
      },
      {"time_step_limit", "numbers"});
  expect_error([&] { parse_model_config(with("head_dim", -16), "c"); }, {"head_dim", "positive"});
  expect_error([&] { parse_model_config(with("model_type", "mamba3"), "c"); }, {"model_type", "mamba3"});

  const json original = json::parse(R"({"d_model": 64, "n_layer": 2, "vocab_size": 300,
    "ssm_cfg": {"layer": "Mamba2", "d_state": 16, "headdim": 16}})");
  auto with_ssm = [&](const char* key, const json& value) {
    json c = original;
    c["ssm_cfg"][key] = value;
    return c;
  };
  auto with_top = [&](const char* key, const json& value) {
    json c = original;
    c[key] = value;
    return c;
  };
  expect_error([&] { parse_model_config(with_ssm("norm_before_gate", true), "c"); }, {"norm_before_gate"});
  expect_error([&] { parse_model_config(with_ssm("d_ssm", 64), "c"); }, {"d_ssm"});
  expect_error([&] { parse_model_config(with_ssm("dt_limit", json::array({-1, 1})), "c"); }, {"dt_limit"});
  expect_error([&] { parse_model_config(with_ssm("headdim", 48), "c"); }, {"head size", "48"});
  expect_error([&] { parse_model_config(with_top("attn_layer_idx", json::array({1})), "c"); },
               {"attn_layer_idx", "hybrid"});
  expect_error([&] { parse_model_config(with_top("d_intermediate", 128), "c"); }, {"d_intermediate"});
}

TEST(Mamba2Load, BothLayoutsOfTheSameWeightsGiveTheSameLogits) {
  const auto hf = Model::load(good_model(ConfigForm::HuggingFace));
  const auto original = Model::load(good_model(ConfigForm::Original));
  const auto tokens = test::random_tokens(20, 40, 9);
  SequenceState a = hf->new_state(), b = original->new_state();
  const ComputeContext ctx{1, best_isa()};
  EXPECT_TRUE(test::same_bits(test::prefill(*hf, ctx, tokens, a, {OutputKind::LogitsAll, 0}),
                              test::prefill(*original, ctx, tokens, b, {OutputKind::LogitsAll, 0})));
}

TEST(Mamba2Load, MissingAndMisshapedTensorsAreNamed) {
  const std::string dir = good_model(ConfigForm::HuggingFace);
  test::rewrite_tensors(dir, [](auto& tensors) {
    std::erase_if(tensors, [](const StoredTensor& t) { return t.name == "backbone.layers.1.mixer.dt_bias"; });
  });
  expect_error([&] { Model::load(dir); }, {"backbone.layers.1.mixer.dt_bias", "[4]"});

  const std::string norm_dir = good_model(ConfigForm::HuggingFace);
  // A gated-norm weight of one group's width instead of d_inner.
  test::rewrite_tensors(norm_dir, [](auto& tensors) {
    for (StoredTensor& t : tensors)
      if (t.name == "backbone.layers.0.mixer.norm.weight") {
        t.shape = {32};
        t.byte_size = 32 * 4;
      }
  });
  expect_error([&] { Model::load(norm_dir); }, {"backbone.layers.0.mixer.norm.weight", "[32]", "[64]"});

  const std::string conv_dir = good_model(ConfigForm::HuggingFace);
  // conv1d over x only (a Mamba-1 habit) instead of x | B | C.
  test::rewrite_tensors(conv_dir, [](auto& tensors) {
    for (StoredTensor& t : tensors)
      if (t.name == "backbone.layers.0.mixer.conv1d.weight") {
        t.shape = {64, 1, 4};
        t.byte_size = 64 * 4 * 4;
      }
  });
  expect_error([&] { Model::load(conv_dir); }, {"conv1d.weight", "[64, 1, 4]", "[128, 1, 4]"});
}

TEST(Mamba2Load, BadForwardInputsLeaveTheStateUntouched) {
  const auto model = Model::load(good_model(ConfigForm::HuggingFace));
  SequenceState state = model->new_state();
  const auto tokens = test::random_tokens(5, 40, 1);
  test::prefill(*model, ComputeContext{1, best_isa()}, tokens, state, {OutputKind::None, 0});
  const auto before = state.download();
  Workspace ws;
  std::vector<std::vector<float>> out;
  const std::vector<int32_t> bad = {1, 40};
  SequenceInput input{&state, bad, {}};
  EXPECT_THROW(model->forward(ComputeContext{}, std::span(&input, 1), {}, ws, out), Error);
  input.tokens = tokens;
  ForwardOptions negative_ssd;
  negative_ssd.ssd_chunk = -1;
  EXPECT_THROW(model->forward(ComputeContext{}, std::span(&input, 1), negative_ssd, ws, out), Error);
  EXPECT_TRUE(test::same_bits(state.download(), before));
  EXPECT_EQ(state.position, 5);
}

}  // namespace
}  // namespace mb

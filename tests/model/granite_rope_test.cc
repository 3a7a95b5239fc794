// SPDX-License-Identifier: MIT
// The all-attention Granite-4.0 models (granite-4.0-micro / -1b / -350m: model_type
// "granitemoehybrid", every layer "attention", position_embedding_type "rope"): the logits of tiny
// checkpoints of that form against a plain double-precision reference written from the
// checkpoint's own tensors (transformers' GraniteMoeHybrid with LlamaRotaryEmbedding's default
// rope type), and the refusal to write such a model as GGUF.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>

#include "common/hybrid_configs.h"
#include "common/layer_reference.h"
#include "common/model_fixture.h"
#include "common/test_util.h"
#include "engine/gguf_convert.h"

namespace mb {
namespace {

using test::ref::product;
using test::ref::rms_norm;
using test::ref::Tensors;
using test::ref::Vec;

// The logits at every position of an all-attention Granite: embedding x multiplier; per layer
// input_layernorm, attention, + residual x multiplier, post_attention_layernorm, the shared
// SwiGLU MLP (input_linear's gate rows first), + residual x multiplier; the final norm; the tied
// head / logits_scaling.
std::vector<float> reference_logits(const ModelConfig& c, const std::string& dir,
                                    const std::vector<int32_t>& tokens, double theta) {
  const Tensors t(dir);
  const int64_t d = c.d_model, S = c.hybrid.mlp.width;
  const Vec embedding = t("model.embed_tokens.weight");
  const double eps = c.norm_eps, residual = c.hybrid.residual_multiplier;
  std::vector<Vec> hs = test::ref::embed(c, embedding, tokens);
  for (int64_t l = 0; l < c.n_layer; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    std::vector<Vec> xs;
    for (const Vec& h : hs) xs.push_back(rms_norm(h, t(p + "input_layernorm.weight"), eps));
    const std::vector<Vec> y = test::ref::attention(c, t, p + "self_attn.", xs, theta);
    const Vec norm = t(p + "post_attention_layernorm.weight");
    const Vec w_in = t(p + "shared_mlp.input_linear.weight"),
              w_out = t(p + "shared_mlp.output_linear.weight");
    for (size_t i = 0; i < hs.size(); ++i) {
      for (int64_t j = 0; j < d; ++j) hs[i][j] += y[i][j] * residual;
      const Vec up = product(w_in, rms_norm(hs[i], norm, eps), 2 * S);
      Vec gated(S);
      for (int64_t j = 0; j < S; ++j) gated[j] = up[j] / (1.0 + std::exp(-up[j])) * up[S + j];
      const Vec f = product(w_out, gated, d);
      for (int64_t j = 0; j < d; ++j) hs[i][j] += f[j] * residual;
    }
  }
  const Vec norm_f = t("model.norm.weight");
  std::vector<float> logits;
  for (const Vec& h : hs) test::ref::append_logits(c, embedding, norm_f, h, logits);
  return logits;
}

struct RopeShape {
  std::string name;
  ModelConfig config;
};

void PrintTo(const RopeShape& s, std::ostream* os) {
  *os << s.name;
}

class GraniteRope : public ::testing::TestWithParam<RopeShape> {};

TEST_P(GraniteRope, LogitsMatchTheDoubleReference) {
  MakeModelOptions o;
  o.config = GetParam().config;
  o.seed = 43;
  const std::string dir = test::write_model(o, "granite_rope");
  const auto model = Model::load(dir);
  const ModelConfig& c = model->config();
  ASSERT_EQ(c.hybrid.attention.rope_theta, GetParam().config.hybrid.attention.rope_theta);
  const auto tokens = test::random_tokens(40, c.vocab_size, 9);
  SequenceState state = model->new_state();
  const auto got =
      test::prefill(*model, ComputeContext{2, best_isa()}, tokens, state, {OutputKind::LogitsAll, 0});
  const auto expected = reference_logits(c, dir, tokens, c.hybrid.attention.rope_theta);
  ASSERT_EQ(got.size(), expected.size());
  const double error = test::max_abs_diff(got, expected) / test::max_abs(expected);
  EXPECT_LE(error, 1e-5);
  // The same weights without RoPE are far from our logits (random weights give near-uniform
  // attention, so RoPE moves the logits by about 1e-3 of their size: hundreds of times our error):
  // the rotation is applied, at every position but the first (whose angle is 0).
  const auto nope = reference_logits(c, dir, tokens, 0.0);
  const double without = test::max_abs_diff(got, nope) / test::max_abs(expected);
  EXPECT_GE(without, 1e-4);
  EXPECT_GE(without, 100.0 * error);
  const std::vector<float> first_row(nope.begin(), nope.begin() + c.vocab_size),
      got_first(got.begin(), got.begin() + c.vocab_size);
  EXPECT_LE(test::max_abs_diff(got_first, first_row) / test::max_abs(first_row), 1e-5);
  std::printf("[ granite rope ] %s: max|diff|/max|ref| = %.3g (without RoPE: %.3g)\n",
              GetParam().name.c_str(), error, without);
}

// Three layers of heads 10 wide (less than a vector; half of them 5) at granite-4.0-micro's base,
// and two layers of one KV head of 8 channels at base 1e4.
INSTANTIATE_TEST_SUITE_P(Shapes, GraniteRope,
                         ::testing::Values(RopeShape{"all_attention_hd10",
                                                     test::granite_rope_config("***", 1e7, 40)},
                                           RopeShape{"one_kv_head_hd8",
                                                     [] {
                                                       ModelConfig c =
                                                           test::granite_rope_config("**", 1e4, 32);
                                                       c.hybrid.attention.n_kv_heads = 1;
                                                       return c;
                                                     }()}),
                         [](const auto& info) { return info.param.name; });

TEST(GraniteRope, WritingAsGgufIsRefusedNamingWhy) {
  MakeModelOptions o;
  o.config = test::granite_rope_config("**", 1e4, 32);
  o.seed = 3;
  const std::string dir = test::write_model(o, "granite_rope_gguf");
  const std::string out = test::make_temp_dir("granite_rope_gguf_out") + "/model.gguf";
  const std::string error = test::error_of([&] { convert_to_gguf(dir, out, GgufFileType::F32, "model"); });
  for (const char* fragment : {"RoPE", "GGUF", "\"granite\""})
    EXPECT_NE(error.find(fragment), std::string::npos) << error << " lacks " << fragment;
  EXPECT_FALSE(std::filesystem::exists(out));
}

}  // namespace
}  // namespace mb

// SPDX-License-Identifier: MIT
// A whole mixture-of-experts layer against a plain double-precision reference written from the
// checkpoint's own tensors (Granite's stacked input_linear with each expert's gate rows first,
// Nemotron-H's per-expert up/down tensors and its correction bias): the logits of one-layer models
// over every position of a prompt, with top-k 1 and 6, more experts than the prompt's rows x top-k
// (experts no row chooses), expert counts and widths that are multiples of nothing, and
// Nemotron-3-Super's latent experts (fc1_latent_proj before them, fc2_latent_proj after).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "common/hybrid_configs.h"
#include "common/layer_reference.h"
#include "common/model_fixture.h"
#include "common/ref_math.h"
#include "common/test_util.h"

namespace mb {
namespace {

using test::ref::product;
using test::ref::rms_norm;
using test::ref::Tensors;
using test::ref::Vec;

// SwiGLU of a [2 W] product (gate | up), or ReLU^2 of a [W] one.
Vec activate(const Vec& up, bool swiglu) {
  const size_t w = swiglu ? up.size() / 2 : up.size();
  Vec h(w);
  for (size_t i = 0; i < w; ++i)
    h[i] = swiglu ? test::silu(up[i]) * up[w + i] : std::pow(std::max(up[i], 0.0), 2);
  return h;
}

// The chosen experts: largest scores first, ties to the lower index.
std::vector<int64_t> top_k(const Vec& scores, int64_t k) {
  std::vector<int64_t> order(scores.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int64_t>(i);
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return scores[a] > scores[b]; });
  order.resize(k);
  return order;
}

// f = shared(x) + sum_j w_j expert_j(x), as each family's modeling code computes it; with latent
// experts, f = shared(x) + fc2(sum_j w_j expert_j(fc1 x)).
Vec moe_layer(const ModelConfig& c, const Tensors& t, const std::string& p, const Vec& x) {
  const bool granite = c.family == ModelFamily::GraniteHybrid;
  const MoeConfig& e = c.hybrid.moe;
  const int64_t d = c.d_model, I = e.width;
  const std::string shared = granite ? p + "shared_mlp." : p + "mixer.shared_experts.";
  const int64_t S = granite ? c.hybrid.mlp.width : e.shared_width;
  Vec f = product(t(shared + (granite ? "output_linear.weight" : "down_proj.weight")),
                  activate(product(t(shared + (granite ? "input_linear.weight" : "up_proj.weight")), x,
                                   granite ? 2 * S : S),
                           granite),
                  d);
  const Vec logits = product(
      t(granite ? p + "block_sparse_moe.router.layer.weight" : p + "mixer.gate.weight"), x, e.n_experts);
  std::vector<int64_t> chosen;
  Vec weights;
  if (granite) {  // softmax over the top logits
    chosen = top_k(logits, e.top_k);
    double sum = 0.0;
    for (int64_t j : chosen) sum += std::exp(logits[j] - logits[chosen[0]]);
    for (int64_t j : chosen) weights.push_back(std::exp(logits[j] - logits[chosen[0]]) / sum);
  } else {  // sigmoid, chosen with the correction bias, renormalized, scaled
    const Vec bias = t(p + "mixer.gate.e_score_correction_bias");
    Vec s(e.n_experts), choice(e.n_experts);
    for (int64_t i = 0; i < e.n_experts; ++i) {
      s[i] = 1.0 / (1.0 + std::exp(-logits[i]));
      choice[i] = s[i] + bias[i];
    }
    chosen = top_k(choice, e.top_k);
    double sum = 0.0;
    for (int64_t j : chosen) sum += s[j];
    for (int64_t j : chosen) weights.push_back(s[j] / (sum + 1e-20) * e.scale);
  }
  // The experts' input and the width of their outputs: fc1 x (latent), or x.
  const int64_t L = e.latent, de = L > 0 ? L : d;
  const Vec xe = L > 0 ? product(t(p + "mixer.fc1_latent_proj.weight"), x, L) : x;
  Vec sum(de, 0.0);
  const Vec up_all = granite ? t(p + "block_sparse_moe.input_linear.weight") : Vec{};
  const Vec down_all = granite ? t(p + "block_sparse_moe.output_linear.weight") : Vec{};
  for (size_t j = 0; j < chosen.size(); ++j) {
    const int64_t ex = chosen[j];
    Vec out;
    if (granite) {  // expert ex's [2 I, d] rows of the stacked tensor: gate rows first, then up
      const Vec h = activate(product(up_all, x, 2 * I, ex * 2 * I), true);
      out = product(down_all, h, d, ex * d);
    } else {
      const std::string name = p + "mixer.experts." + std::to_string(ex) + ".";
      out = product(t(name + "down_proj.weight"), activate(product(t(name + "up_proj.weight"), xe, I), false),
                    de);
    }
    for (int64_t i = 0; i < de; ++i) sum[i] += weights[j] * out[i];
  }
  const Vec routed = L > 0 ? product(t(p + "mixer.fc2_latent_proj.weight"), sum, d) : sum;
  for (int64_t i = 0; i < d; ++i) f[i] += routed[i];
  return f;
}

// The logits of a one-layer model ("E" for Nemotron-H, "*" for Granite) at every position.
std::vector<float> reference_logits(const ModelConfig& c, const std::string& dir,
                                    const std::vector<int32_t>& tokens) {
  const Tensors t(dir);
  const bool granite = c.family == ModelFamily::GraniteHybrid;
  const int64_t d = c.d_model;
  const Vec embedding = t(granite ? "model.embed_tokens.weight" : "backbone.embeddings.weight");
  const Vec head = granite ? embedding : t("lm_head.weight");
  const double eps = c.norm_eps, residual = c.hybrid.residual_multiplier;
  std::vector<Vec> hs = test::ref::embed(c, embedding, tokens);
  const std::string p = granite ? "model.layers.0." : "backbone.layers.0.";
  if (granite) {
    std::vector<Vec> xs;
    for (const Vec& h : hs) xs.push_back(rms_norm(h, t(p + "input_layernorm.weight"), eps));
    const std::vector<Vec> y = test::ref::attention(c, t, p + "self_attn.", xs);  // Granite's "*": no RoPE
    for (size_t i = 0; i < hs.size(); ++i)
      for (int64_t j = 0; j < d; ++j) hs[i][j] += y[i][j] * residual;
  }
  const Vec norm = t(p + (granite ? "post_attention_layernorm.weight" : "norm.weight"));
  const Vec norm_f = t(granite ? "model.norm.weight" : "backbone.norm_f.weight");
  std::vector<float> logits;
  for (Vec& h : hs) {
    const Vec f = moe_layer(c, t, p, rms_norm(h, norm, eps));
    for (int64_t j = 0; j < d; ++j) h[j] += f[j] * residual;
    test::ref::append_logits(c, head, norm_f, h, logits);
  }
  return logits;
}

struct LayerShape {
  std::string name;
  ModelConfig config;
};

// gtest prints a shape as its name.
void PrintTo(const LayerShape& s, std::ostream* os) {
  *os << s.name;
}

class MoeLayer : public ::testing::TestWithParam<LayerShape> {};

TEST_P(MoeLayer, LogitsMatchTheDoubleReference) {
  MakeModelOptions o;
  o.config = GetParam().config;
  o.seed = 41;
  const std::string dir = test::write_model(o, "moe_layer");
  const auto model = Model::load(dir);
  const auto tokens = test::random_tokens(12, model->config().vocab_size, 8);
  SequenceState state = model->new_state();
  const auto got =
      test::prefill(*model, ComputeContext{2, best_isa()}, tokens, state, {OutputKind::LogitsAll, 0});
  const auto expected = reference_logits(model->config(), dir, tokens);
  ASSERT_EQ(got.size(), expected.size());
  const double error = test::max_abs_diff(got, expected) / test::max_abs(expected);
  EXPECT_LE(error, 1e-5);
  std::printf("[ moe layer ] %s: max|diff|/max|ref| = %.3g\n", GetParam().name.c_str(), error);
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, MoeLayer,
    ::testing::Values(LayerShape{"granite_top6_of_9", test::granite_moe_config("*", 9, 6, 20)},
                      LayerShape{"granite_top1_of_16", test::granite_moe_config("*", 16, 1, 12)},
                      LayerShape{"nemotron_top6_of_7", test::nemotron_moe_config("E", 7, 6, 24)},
                      LayerShape{"nemotron_top1_of_16", test::nemotron_moe_config("E", 16, 1, 20)},
                      LayerShape{"nemotron_latent_24", test::nemotron_latent_config("E", 24)},
                      LayerShape{"nemotron_latent_72", test::nemotron_latent_config("E", 72, 9, 6, 33)}),
    [](const auto& info) { return info.param.name; });

}  // namespace
}  // namespace mb

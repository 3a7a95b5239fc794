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
#include "common/model_fixture.h"
#include "common/test_util.h"
#include "engine/gguf_convert.h"
#include "io/safetensors.h"
#include "ops/quant.h"

namespace mb {
namespace {

using Vec = std::vector<double>;

class Tensors {
 public:
  explicit Tensors(const std::string& dir) : set_(TensorSet::open_dir(dir)) {}
  Vec operator()(const std::string& name) const {
    const StoredTensor* t = set_.find(name);
    EXPECT_NE(t, nullptr) << name;
    if (t == nullptr) return {};
    std::vector<float> values(static_cast<size_t>(t->element_count()));
    dequantize_row(*t->dtype, t->data, t->element_count(), values.data());
    return Vec(values.begin(), values.end());
  }

 private:
  TensorSet set_;
};

// y = W x for W [rows, cols] row-major.
Vec product(const Vec& w, const Vec& x, int64_t rows) {
  const int64_t cols = static_cast<int64_t>(x.size());
  Vec y(rows, 0.0);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) y[r] += w[r * cols + c] * x[c];
  return y;
}

Vec rms_norm(const Vec& x, const Vec& weight, double eps) {
  double sum = 0.0;
  for (double v : x) sum += v * v;
  const double inv = 1.0 / std::sqrt(sum / static_cast<double>(x.size()) + eps);
  Vec y(x.size());
  for (size_t i = 0; i < x.size(); ++i) y[i] = x[i] * inv * weight[i];
  return y;
}

// apply_rotary_pos_emb with rotate_half: every head of x rotated by position `pos`.
void rotate(Vec& x, int64_t heads, int64_t hd, int64_t pos, double theta) {
  const int64_t half = hd / 2;
  for (int64_t i = 0; i < half; ++i) {
    const double angle = static_cast<double>(pos) / std::pow(theta, 2.0 * static_cast<double>(i) / hd);
    const double c = std::cos(angle), s = std::sin(angle);
    for (int64_t h = 0; h < heads; ++h) {
      const double a = x[h * hd + i], b = x[h * hd + half + i];
      x[h * hd + i] = a * c - b * s;
      x[h * hd + half + i] = b * c + a * s;
    }
  }
}

// Layer l's attention over every position of xs, with RoPE when `theta` > 0.
std::vector<Vec> attention(const ModelConfig& c, const Tensors& t, int64_t l, const std::vector<Vec>& xs,
                           double theta) {
  const AttentionConfig& a = c.hybrid.attention;
  const std::string p = "model.layers." + std::to_string(l) + ".self_attn.";
  const int64_t hd = a.head_dim, group = a.n_heads / a.n_kv_heads;
  const Vec wq = t(p + "q_proj.weight"), wk = t(p + "k_proj.weight"), wv = t(p + "v_proj.weight");
  std::vector<Vec> q, k, v, out;
  for (size_t pos = 0; pos < xs.size(); ++pos) {
    q.push_back(product(wq, xs[pos], a.n_heads * hd));
    k.push_back(product(wk, xs[pos], a.n_kv_heads * hd));
    v.push_back(product(wv, xs[pos], a.n_kv_heads * hd));
    if (theta > 0.0) {
      rotate(q.back(), a.n_heads, hd, static_cast<int64_t>(pos), theta);
      rotate(k.back(), a.n_kv_heads, hd, static_cast<int64_t>(pos), theta);
    }
  }
  const Vec wo = t(p + "o_proj.weight");
  for (size_t pos = 0; pos < xs.size(); ++pos) {
    Vec y(a.n_heads * hd, 0.0);
    for (int64_t h = 0; h < a.n_heads; ++h) {
      const int64_t kv = (h / group) * hd;
      Vec s(pos + 1, 0.0);
      for (size_t j = 0; j <= pos; ++j) {
        for (int64_t i = 0; i < hd; ++i) s[j] += q[pos][h * hd + i] * k[j][kv + i];
        s[j] *= a.scale;
      }
      const double peak = *std::max_element(s.begin(), s.end());
      double sum = 0.0;
      for (double& w : s) sum += w = std::exp(w - peak);
      for (size_t j = 0; j <= pos; ++j)
        for (int64_t i = 0; i < hd; ++i) y[h * hd + i] += s[j] / sum * v[j][kv + i];
    }
    out.push_back(product(wo, y, c.d_model));
  }
  return out;
}

// The logits at every position of an all-attention Granite: embedding x multiplier; per layer
// input_layernorm, attention, + residual x multiplier, post_attention_layernorm, the shared
// SwiGLU MLP (input_linear's gate rows first), + residual x multiplier; the final norm; the tied
// head / logits_scaling.
std::vector<float> reference_logits(const ModelConfig& c, const std::string& dir,
                                    const std::vector<int32_t>& tokens, double theta) {
  const Tensors t(dir);
  const int64_t d = c.d_model, V = c.vocab_size, S = c.hybrid.mlp.width;
  const Vec embedding = t("model.embed_tokens.weight");
  const double eps = c.norm_eps, residual = c.hybrid.residual_multiplier;
  std::vector<Vec> hs;
  for (int32_t token : tokens) {
    Vec h(embedding.begin() + token * d, embedding.begin() + (token + 1) * d);
    for (double& v : h) v *= c.hybrid.embedding_multiplier;
    hs.push_back(h);
  }
  for (int64_t l = 0; l < c.n_layer; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    std::vector<Vec> xs;
    for (const Vec& h : hs) xs.push_back(rms_norm(h, t(p + "input_layernorm.weight"), eps));
    const std::vector<Vec> y = attention(c, t, l, xs, theta);
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
  for (const Vec& h : hs)
    for (double v : product(embedding, rms_norm(h, norm_f, eps), V))
      logits.push_back(static_cast<float>(v / c.hybrid.logits_scaling));
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

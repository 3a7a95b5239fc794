// SPDX-License-Identifier: MIT
#include "common/layer_reference.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "ops/quant.h"

namespace mb::test::ref {

Tensors::Tensors(const std::string& dir) : set_(TensorSet::open_dir(dir)) {}

Vec Tensors::operator()(const std::string& name) const {
  const StoredTensor* t = set_.find(name);
  EXPECT_NE(t, nullptr) << name;
  if (t == nullptr) return {};
  std::vector<float> values(static_cast<size_t>(t->element_count()));
  dequantize_row(*t->dtype, t->data, t->element_count(), values.data());
  return Vec(values.begin(), values.end());
}

Vec product(const Vec& w, const Vec& x, int64_t rows, int64_t first) {
  const int64_t cols = static_cast<int64_t>(x.size());
  Vec y(rows, 0.0);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) y[r] += w[(first + r) * cols + c] * x[c];
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

std::vector<Vec> embed(const ModelConfig& c, const Vec& embedding, const std::vector<int32_t>& tokens) {
  const int64_t d = c.d_model;
  std::vector<Vec> hs;
  for (int32_t token : tokens) {
    Vec h(embedding.begin() + token * d, embedding.begin() + (token + 1) * d);
    for (double& v : h) v *= c.hybrid.embedding_multiplier;
    hs.push_back(h);
  }
  return hs;
}

void append_logits(const ModelConfig& c, const Vec& head, const Vec& norm_f, const Vec& h,
                   std::vector<float>& logits) {
  for (double v : product(head, rms_norm(h, norm_f, c.norm_eps), c.vocab_size))
    logits.push_back(static_cast<float>(v / c.hybrid.logits_scaling));
}

namespace {

// Every head of x rotated by position `pos`: pairs (i, i + half) by the angle pos / theta^(2i/hd).
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

}  // namespace

std::vector<Vec> attention(const ModelConfig& c, const Tensors& t, const std::string& prefix,
                           const std::vector<Vec>& xs, double rope_theta) {
  const AttentionConfig& a = c.hybrid.attention;
  const int64_t hd = a.head_dim, group = a.n_heads / a.n_kv_heads;
  const Vec wq = t(prefix + "q_proj.weight"), wk = t(prefix + "k_proj.weight"),
            wv = t(prefix + "v_proj.weight");
  std::vector<Vec> q, k, v, out;
  for (size_t pos = 0; pos < xs.size(); ++pos) {
    q.push_back(product(wq, xs[pos], a.n_heads * hd));
    k.push_back(product(wk, xs[pos], a.n_kv_heads * hd));
    v.push_back(product(wv, xs[pos], a.n_kv_heads * hd));
    if (rope_theta > 0.0) {
      rotate(q.back(), a.n_heads, hd, static_cast<int64_t>(pos), rope_theta);
      rotate(k.back(), a.n_kv_heads, hd, static_cast<int64_t>(pos), rope_theta);
    }
  }
  const Vec wo = t(prefix + "o_proj.weight");
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

}  // namespace mb::test::ref

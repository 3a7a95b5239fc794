// SPDX-License-Identifier: MIT
// Plain double-precision reference of the mixture-of-experts op (ops/moe.h): simple loops that
// follow the header's definition, never optimized; tests compare the kernels against it.
#include <algorithm>
#include <cmath>
#include <vector>

#include "core/dtype.h"
#include "ops/moe.h"
#include "ops/quant_matmul.h"

namespace mb {
namespace {

// The input of a product with `w` as the product sees it: a quantized product first quantizes
// the row (rounded to f32) per activation block; float products read it as given.
std::vector<double> product_input(const WeightMatrix& w, const std::vector<double>& row) {
  if (!dtype_is_quantized(w.dtype)) return row;
  const int64_t k = static_cast<int64_t>(row.size()), block = activation_block(w.dtype);
  std::vector<float> f(row.begin(), row.end());
  std::vector<int8_t> q(k);
  std::vector<float> scales(k / block);
  std::vector<int32_t> sums(k / 16);
  quantize_activations(f.data(), k, block, q.data(), scales.data(), sums.data());
  std::vector<double> out(k);
  for (int64_t i = 0; i < k; ++i) out[i] = static_cast<double>(static_cast<float>(q[i]) * scales[i / block]);
  return out;
}

std::vector<double> product(const WeightMatrix& w, const std::vector<double>& row) {
  const std::vector<double> in = product_input(w, row);
  std::vector<double> out(w.rows, 0.0);
  std::vector<float> weights(w.cols);
  for (int64_t n = 0; n < w.rows; ++n) {
    // A quantized row is widened whole (element by element would widen its block each time).
    if (dtype_is_quantized(w.dtype)) {
      dequantize_packed_row(w, n, weights.data());
    } else {
      for (int64_t k = 0; k < w.cols; ++k) weights[k] = packed_weight(w, n, k);
    }
    for (int64_t k = 0; k < w.cols; ++k) out[n] += in[k] * weights[k];
  }
  return out;
}

// Whether score a of expert ia ranks before score b of expert ib: larger first, NaN last, equal
// scores (and NaNs among themselves) in ascending expert order.
bool ranks_before(double a, int64_t ia, double b, int64_t ib) {
  if (std::isnan(a) || std::isnan(b)) return std::isnan(a) == std::isnan(b) ? ia < ib : std::isnan(b);
  return a != b ? a > b : ia < ib;
}

// The chosen experts of one row, slot 0 first.
std::vector<int64_t> choose(const std::vector<double>& scores, int64_t top_k) {
  std::vector<int64_t> order(scores.size());
  for (size_t e = 0; e < order.size(); ++e) order[e] = static_cast<int64_t>(e);
  std::sort(order.begin(), order.end(),
            [&](int64_t a, int64_t b) { return ranks_before(scores[a], a, scores[b], b); });
  order.resize(top_k);
  return order;
}

}  // namespace

void moe_reference(const MoeParams& p, const MoeWeights& w, const MoeArgs& a, float* routes,
                   int64_t ld_routes) {
  const int64_t d = p.d_model, de = p.expert_dim(), E = p.n_experts, k = p.top_k;
  for (int64_t r = 0; r < a.m; ++r) {
    const std::vector<double> x(a.x + r * a.ldx, a.x + r * a.ldx + d);
    // The experts' input: the latent row, or the router's.
    const std::vector<double> xe =
        a.xe != nullptr ? std::vector<double>(a.xe + r * a.ldxe, a.xe + r * a.ldxe + de) : x;
    std::vector<double> logits(E, 0.0);
    for (int64_t e = 0; e < E; ++e)
      for (int64_t c = 0; c < d; ++c) logits[e] += x[c] * packed_weight(w.router, e, c);

    std::vector<double> scores = logits, values = logits;  // what is ranked, what weighs
    if (p.scoring == MoeScoring::SigmoidBias) {
      for (int64_t e = 0; e < E; ++e) {
        values[e] = 1.0 / (1.0 + std::exp(-logits[e]));
        scores[e] = values[e] + (w.correction_bias != nullptr ? w.correction_bias[e] : 0.0);
      }
    } else if (p.scoring == MoeScoring::SoftmaxAll) {
      const double peak = *std::max_element(logits.begin(), logits.end());
      double sum = 0.0;
      for (int64_t e = 0; e < E; ++e) sum += values[e] = std::exp(logits[e] - peak);
      for (double& v : values) v /= sum;
      scores = values;
    }
    const std::vector<int64_t> chosen = choose(scores, k);
    std::vector<double> weight(k);
    for (int64_t j = 0; j < k; ++j) weight[j] = values[chosen[j]];
    if (p.scoring == MoeScoring::SoftmaxTopK) {
      double sum = 0.0;
      for (int64_t j = 0; j < k; ++j) sum += weight[j] = std::exp(values[chosen[j]] - values[chosen[0]]);
      for (double& v : weight) v /= sum;
    }
    if (p.normalize) {
      double sum = 0.0;
      for (double v : weight) sum += v;
      for (double& v : weight) v /= sum + p.norm_epsilon;
    }
    for (double& v : weight) v *= p.scale;

    std::vector<double> y(de, 0.0);
    for (int64_t j = 0; j < k; ++j) {
      const int64_t e = chosen[j];
      const std::vector<double> up = product(w.up[e], xe);
      std::vector<double> h(p.width);
      for (int64_t c = 0; c < p.width; ++c) {
        if (p.activation == Activation::SwiGlu) {
          const double g = up[c];
          h[c] = g / (1.0 + std::exp(-g)) * up[p.width + c];
        } else {
          const double v = std::max(up[c], 0.0);
          h[c] = v * v;
        }
      }
      const std::vector<double> o = product(w.down[e], h);
      for (int64_t c = 0; c < de; ++c) y[c] += weight[j] * o[c];
    }
    float* out = a.y + r * a.ldy;
    for (int64_t c = 0; c < de; ++c) out[c] = static_cast<float>(a.accumulate ? out[c] + y[c] : y[c]);
    if (routes != nullptr)
      for (int64_t j = 0; j < k; ++j) {
        routes[r * ld_routes + j] = static_cast<float>(chosen[j]);
        routes[r * ld_routes + k + j] = static_cast<float>(weight[j]);
      }
  }
}

}  // namespace mb

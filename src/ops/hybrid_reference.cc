// SPDX-License-Identifier: MIT
// Plain double-precision references of the hybrid models' ops (ops/attention.h, ops/rope.h,
// ops/ffn.h):
// simple loops that follow the math of each header, never optimized; tests compare the kernels
// against them.
#include <cmath>
#include <numbers>
#include <vector>

#include "ops/attention.h"
#include "ops/ffn.h"
#include "ops/rope.h"

namespace mb {

void attention_reference(const AttentionParams& p, const AttentionSequence& s) {
  const int64_t hd = p.head_dim, group = p.n_heads / p.n_kv_heads;
  std::vector<double> w;
  for (int64_t r = 0; r < s.rows; ++r) {
    const int64_t keys = s.position + r + 1;
    w.assign(keys, 0.0);
    for (int64_t h = 0; h < p.n_heads; ++h) {
      const float* q = s.q + r * s.ldq + h * hd;
      const int64_t kv = (h / group) * hd;
      double peak = -INFINITY;
      for (int64_t j = 0; j < keys; ++j) {
        double dot = 0.0;
        for (int64_t d = 0; d < hd; ++d) dot += double(q[d]) * s.k.row(j)[kv + d];
        w[j] = dot * p.scale;
        peak = std::max(peak, w[j]);
      }
      double sum = 0.0;
      for (int64_t j = 0; j < keys; ++j) sum += w[j] = std::exp(w[j] - peak);
      for (int64_t d = 0; d < hd; ++d) {
        double acc = 0.0;
        for (int64_t j = 0; j < keys; ++j) acc += w[j] * s.v.row(j)[kv + d];
        s.y[r * s.ldy + h * hd + d] = static_cast<float>(acc / sum);
      }
    }
  }
}

void rope_reference(const RopeParams& p, const RopeSequence& s) {
  // Channels rot..hd-1 are left as they are.
  const int64_t hd = p.head_dim, rot = p.rotary_dims > 0 ? p.rotary_dims : hd, half = rot / 2;
  for (int64_t r = 0; r < s.rows; ++r) {
    const double pos = static_cast<double>(s.position + r);
    for (int64_t i = 0; i < half; ++i) {
      const double angle = pos / std::pow(p.theta, static_cast<double>(2 * i) / static_cast<double>(rot));
      const double c = std::cos(angle), sn = std::sin(angle);
      const auto rotate = [&](float* x, int64_t heads) {
        for (int64_t h = 0; h < heads; ++h) {
          const double a = x[h * hd + i], b = x[h * hd + half + i];
          x[h * hd + i] = static_cast<float>(a * c - b * sn);
          x[h * hd + half + i] = static_cast<float>(b * c + a * sn);
        }
      };
      if (p.n_heads > 0) rotate(s.q + r * s.ldq, p.n_heads);
      if (p.n_kv_heads > 0) rotate(s.k + r * s.ldk, p.n_kv_heads);
    }
  }
}

void glu_reference(const GluArgs& a) {
  for (int64_t r = 0; r < a.rows; ++r) {
    const float* x = a.x + r * a.ldx;
    float* y = a.y + r * a.ldy;
    for (int64_t c = 0; c < a.width; ++c) {
      double out;
      if (a.activation == Activation::SwiGlu) {
        const double g = x[c];
        out = g / (1.0 + std::exp(-g)) * x[a.width + c];
      } else if (a.activation == Activation::SigmoidGlu) {
        out = static_cast<double>(x[a.width + c]) / (1.0 + std::exp(-static_cast<double>(x[c])));
      } else if (a.activation == Activation::GeluErf) {
        const double g = x[c];
        out = 0.5 * g * std::erfc(-g / std::numbers::sqrt2) * x[a.width + c];
      } else {
        const double v = x[c] > 0.0f ? x[c] : 0.0;
        out = v * v;
      }
      y[c] = static_cast<float>(out);
    }
  }
}

void scale_rows_reference(const ScaleArgs& a) {
  for (int64_t r = 0; r < a.rows; ++r)
    for (int64_t c = 0; c < a.cols; ++c) {
      const double v = double(a.x[r * a.ldx + c]) * a.scale;
      float& y = a.y[r * a.ldy + c];
      y = static_cast<float>(a.accumulate ? y + v : v);
    }
}

}  // namespace mb

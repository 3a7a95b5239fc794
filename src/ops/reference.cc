// SPDX-License-Identifier: MIT
// Plain double-precision references of the CPU ops. They are deliberately simple loops that
// follow the math of each op header, never optimized; tests compare the kernels against them.
#include <cmath>
#include <vector>

#include "core/dtype.h"
#include "ops/causal_conv.h"
#include "ops/gated_rms_norm.h"
#include "ops/matmul.h"
#include "ops/quant_matmul.h"
#include "ops/rms_norm.h"
#include "ops/selective_scan.h"

namespace mb {
namespace {

double silu(double x) {
  return x / (1.0 + std::exp(-x));
}
double softplus(double x) {
  return x > 20.0 ? x : std::log1p(std::exp(x));
}

}  // namespace

void matmul_reference(const MatmulArgs& a) {
  // Rows of W widened once (a quantized row is dequantized as a whole).
  std::vector<float> w(static_cast<size_t>(a.w.rows * a.w.cols));
  for (int64_t n = 0; n < a.w.rows; ++n) {
    if (dtype_is_quantized(a.w.dtype))
      dequantize_packed_row(a.w, n, w.data() + n * a.w.cols);
    else
      for (int64_t k = 0; k < a.w.cols; ++k) w[n * a.w.cols + k] = packed_weight(a.w, n, k);
  }
  for (int64_t m = 0; m < a.m; ++m) {
    for (int64_t n = 0; n < a.w.rows; ++n) {
      double sum = 0.0;
      for (int64_t k = 0; k < a.w.cols; ++k)
        sum += static_cast<double>(a.x[m * a.ldx + k]) * w[n * a.w.cols + k];
      if (a.bias != nullptr) sum += a.bias[n];
      if (a.softplus) sum = softplus(sum);
      float& out = a.y[m * a.ldy + n];
      out = static_cast<float>(a.accumulate ? out + sum : sum);
    }
  }
}

void rms_norm_reference(const RmsNormArgs& a) {
  for (int64_t r = 0; r < a.rows; ++r) {
    double sum_squares = 0.0;
    for (int64_t k = 0; k < a.dim; ++k)
      sum_squares += static_cast<double>(a.x[r * a.ldx + k]) * a.x[r * a.ldx + k];
    const double inv = 1.0 / std::sqrt(sum_squares / a.dim + a.eps);
    for (int64_t k = 0; k < a.dim; ++k)
      a.y[r * a.ldy + k] = static_cast<float>(a.x[r * a.ldx + k] * inv * a.weight[k]);
  }
}

void gated_rms_norm_reference(const GatedRmsNormArgs& a) {
  for (int64_t r = 0; r < a.rows; ++r) {
    std::vector<double> v(a.dim);
    for (int64_t k = 0; k < a.dim; ++k) v[k] = a.y[r * a.ldy + k] * silu(a.z[r * a.ldz + k]);
    for (int64_t g0 = 0; g0 < a.dim; g0 += a.group_size) {
      double inv = 1.0;
      if (a.weight != nullptr) {
        double sum_squares = 0.0;
        for (int64_t k = g0; k < g0 + a.group_size; ++k) sum_squares += v[k] * v[k];
        inv = 1.0 / std::sqrt(sum_squares / a.group_size + a.eps);
      }
      for (int64_t k = g0; k < g0 + a.group_size; ++k)
        a.out[r * a.ldout + k] = static_cast<float>(v[k] * inv * (a.weight != nullptr ? a.weight[k] : 1.0));
    }
  }
}

void causal_conv_silu_reference(const CausalConvArgs& a) {
  const int K = a.kernel_size;
  for (int64_t c = 0; c < a.channels; ++c) {
    // The full input stream of this channel: history first, then the new positions.
    std::vector<double> stream;
    for (int k = 0; k + 1 < K; ++k) stream.push_back(a.history[k * a.channels + c]);
    for (int64_t t = 0; t < a.length; ++t) stream.push_back(a.x[t * a.ldx + c]);
    for (int64_t t = 0; t < a.length; ++t) {
      double acc = a.bias != nullptr ? a.bias[c] : 0.0;
      for (int k = 0; k < K; ++k) acc += static_cast<double>(a.weight[k * a.channels + c]) * stream[t + k];
      a.y[t * a.ldy + c] = static_cast<float>(silu(acc));
    }
    for (int k = 0; k + 1 < K; ++k) a.history[k * a.channels + c] = static_cast<float>(stream[a.length + k]);
  }
}

void selective_scan_reference(const SelectiveScanArgs& a) {
  for (int64_t ch = 0; ch < a.channels; ++ch) {
    std::vector<double> h(a.d_state);
    for (int64_t n = 0; n < a.d_state; ++n) h[n] = a.state[n * a.channels + ch];
    for (int64_t t = 0; t < a.length; ++t) {
      const double u = a.u[t * a.ldu + ch];
      const double dt = a.dt[t * a.lddt + ch];
      double y = 0.0;
      for (int64_t n = 0; n < a.d_state; ++n) {
        h[n] = std::exp2(dt * a.a_base2[n * a.channels + ch]) * h[n] + dt * u * a.b[t * a.ldbc + n];
        y += h[n] * a.c[t * a.ldbc + n];
      }
      y += static_cast<double>(a.d_skip[ch]) * u;
      if (a.z != nullptr) y *= silu(a.z[t * a.ldz + ch]);
      a.y[t * a.ldy + ch] = static_cast<float>(y);
    }
    for (int64_t n = 0; n < a.d_state; ++n) a.state[n * a.channels + ch] = static_cast<float>(h[n]);
  }
}

}  // namespace mb

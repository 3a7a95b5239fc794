// SPDX-License-Identifier: MIT
// Plain double-precision evaluation of the Mamba-3 scan op, written from the spec's per-token
// step (mamba3-siso.md §4 to §8.2): simple loops, no shared code with the kernels, so tests can
// check both scan orders against it.
#include <algorithm>
#include <cmath>
#include <vector>

#include "ops/mamba3_scan.h"

namespace mb {
namespace {

double softplus(double x) {
  return x > 20.0 ? x : std::log1p(std::exp(x));
}
double sigmoid(double x) {
  return 1.0 / (1.0 + std::exp(-x));
}

// RMSNorm of n values with weight w, in double.
std::vector<double> rms_normed(const float* x, int64_t n, const float* w, double eps) {
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) sum += double(x[i]) * x[i];
  const double inv = 1.0 / std::sqrt(sum / n + eps);
  std::vector<double> y(n);
  for (int64_t i = 0; i < n; ++i) y[i] = x[i] * inv * w[i];
  return y;
}

}  // namespace

void mamba3_scan_reference(const Mamba3ScanParams& p, const Mamba3ScanSequence& seq) {
  const int64_t H = p.n_heads, P = p.headdim, N = p.d_state, G = p.n_groups, na = p.n_angles,
                di = p.d_inner();
  const int64_t off_b = 2 * di, off_c = off_b + G * N, off_dt = off_c + G * N, off_a = off_dt + H,
                off_trap = off_a + H, off_angle = off_trap + H;
  const Mamba3StateLayout layout = mamba3_state_layout(p);
  const int64_t angle_stride = na > 0 ? na : 1;
  // The state in double for the duration of the call; written back in f32 at the end.
  std::vector<double> S(H * N * P), K(H * N), V(H * P), angle(H * angle_stride);
  for (size_t i = 0; i < S.size(); ++i) S[i] = seq.state[layout.ssm + i];
  for (size_t i = 0; i < K.size(); ++i) K[i] = seq.state[layout.k + i];
  for (size_t i = 0; i < V.size(); ++i) V[i] = seq.state[layout.v + i];
  for (size_t i = 0; i < angle.size(); ++i) angle[i] = seq.state[layout.angle + i];

  for (int64_t t = 0; t < seq.length; ++t) {
    const float* row = seq.proj + t * seq.ldp;
    std::vector<double> omega(na);
    for (int64_t a = 0; a < na; ++a) omega[a] = std::tanh(double(row[off_angle + a])) * M_PI;
    for (int64_t h = 0; h < H; ++h) {
      const int64_t g = h / (H / G);
      const double dt = softplus(double(row[off_dt + h]) + p.dt_bias[h]);
      const double raw_a = row[off_a + h];
      const double heavy_tail = raw_a >= 0 ? 1.0 + raw_a : 1.0 / (1.0 - raw_a);
      const double A = std::min(-heavy_tail, -double(p.a_floor));
      const double lam = sigmoid(row[off_trap + h]);
      const double alpha = std::exp(A * dt), beta = alpha * dt * (1.0 - lam), gamma = lam * dt;

      const std::vector<double> bn = rms_normed(row + off_b + g * N, N, p.b_norm, p.eps);
      const std::vector<double> cn = rms_normed(row + off_c + g * N, N, p.c_norm, p.eps);
      std::vector<double> k(N), q(N);
      for (int64_t n = 0; n < N; ++n) {
        k[n] = bn[n] + p.b_bias[h * N + n];
        q[n] = cn[n] + p.c_bias[h * N + n];
      }
      for (int64_t a = 0; a < na; ++a) {
        double& theta = angle[h * angle_stride + a];
        theta += omega[a] * dt;
        theta -= 2 * M_PI * std::floor(theta / (2 * M_PI));
        const double c = std::cos(theta), s = std::sin(theta);
        const double k0 = k[2 * a], k1 = k[2 * a + 1], q0 = q[2 * a], q1 = q[2 * a + 1];
        k[2 * a] = c * k0 - s * k1;
        k[2 * a + 1] = s * k0 + c * k1;
        q[2 * a] = c * q0 - s * q1;
        q[2 * a + 1] = s * q0 + c * q1;
      }

      std::vector<double> y(P);
      for (int64_t i = 0; i < P; ++i) {
        const double v = row[di + h * P + i];
        double sum = 0;
        for (int64_t n = 0; n < N; ++n) {
          double& s = S[(h * N + n) * P + i];
          s = alpha * s + beta * V[h * P + i] * K[h * N + n] + gamma * v * k[n];
          sum += s * q[n];
        }
        y[i] = sum + p.d_skip[h] * v;
      }
      double rstd = 1.0;
      if (p.gate_norm != nullptr) {
        double sum = 0;
        for (double v : y) sum += v * v;
        rstd = 1.0 / std::sqrt(sum / P + p.eps);
      }
      for (int64_t i = 0; i < P; ++i) {
        const double z = row[h * P + i];
        const double w = p.gate_norm != nullptr ? p.gate_norm[h * P + i] * rstd : 1.0;
        seq.y[t * seq.ldy + h * P + i] = static_cast<float>(y[i] * w * z * sigmoid(z));
      }
      for (int64_t n = 0; n < N; ++n) K[h * N + n] = k[n];
      for (int64_t i = 0; i < P; ++i) V[h * P + i] = row[di + h * P + i];
    }
  }
  for (size_t i = 0; i < S.size(); ++i) seq.state[layout.ssm + i] = static_cast<float>(S[i]);
  for (size_t i = 0; i < K.size(); ++i) seq.state[layout.k + i] = static_cast<float>(K[i]);
  for (size_t i = 0; i < V.size(); ++i) seq.state[layout.v + i] = static_cast<float>(V[i]);
  for (size_t i = 0; i < angle.size(); ++i) seq.state[layout.angle + i] = static_cast<float>(angle[i]);
}

}  // namespace mb

// SPDX-License-Identifier: MIT
// Plain double-precision evaluation of the Mamba-2 scan op, written from the recurrence of
// mamba_ssm's selective_state_update (one position at a time): simple loops, no shared code with
// the kernels, so tests can check both scan orders against it.
#include <algorithm>
#include <cmath>
#include <vector>

#include "ops/mamba2_scan.h"

namespace mb {

void mamba2_scan_reference(const Mamba2ScanParams& p, const Mamba2ScanSequence& seq) {
  const int64_t H = p.n_heads, P = p.headdim, N = p.d_state, G = p.n_groups, di = p.d_inner();
  std::vector<double> S(seq.state, seq.state + H * N * P);  // [H, N, P]
  for (int64_t t = 0; t < seq.length; ++t) {
    const float* row = seq.xbc + t * seq.ldxbc;
    for (int64_t h = 0; h < H; ++h) {
      const int64_t g = h / (H / G);
      const float* x = row + h * P;
      const float* b = row + di + g * N;
      const float* c = row + di + G * N + g * N;
      const double raw = static_cast<double>(seq.dt[t * seq.lddt + h]) + p.dt_bias[h];
      const double softplus = raw > 20.0 ? raw : std::log1p(std::exp(raw));
      const double dt = std::min<double>(std::max<double>(softplus, p.dt_min), p.dt_max);
      // A = a_base2 / log2(e), so exp(dt * A) = 2^(dt * a_base2).
      const double decay = std::exp2(dt * p.a_base2[h]);
      for (int64_t j = 0; j < P; ++j) {
        double y = 0.0;
        for (int64_t n = 0; n < N; ++n) {
          double& s = S[(h * N + n) * P + j];
          s = decay * s + dt * x[j] * b[n];
          y += s * c[n];
        }
        const double d = p.d_skip_per_channel ? p.d_skip[h * P + j] : p.d_skip[h];
        seq.y[t * seq.ldy + h * P + j] = static_cast<float>(y + d * x[j]);
      }
    }
  }
  for (size_t i = 0; i < S.size(); ++i) seq.state[i] = static_cast<float>(S[i]);
}

}  // namespace mb

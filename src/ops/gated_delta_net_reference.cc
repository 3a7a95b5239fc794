// SPDX-License-Identifier: MIT
// Plain double-precision evaluation of the Gated DeltaNet op, written from HF's
// torch_recurrent_gated_delta_rule (one position at a time; ../shared/specs/gated-deltanet.md
// section 4.2): simple loops, no shared code with the kernels, so tests can check them against it.
#include <cmath>
#include <vector>

#include "core/error.h"
#include "ops/gated_delta_net.h"

namespace mb {
namespace {

// x * rsqrt(sum x^2 + eps) * scale over one head, in double (HF's l2norm, then the query scale).
std::vector<double> l2_normalized(const float* x, int64_t n, double eps, double scale) {
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) sum += static_cast<double>(x[i]) * x[i];
  const double inv = 1.0 / std::sqrt(sum + eps);
  std::vector<double> out(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) out[i] = x[i] * inv * scale;
  return out;
}

}  // namespace

void gated_delta_net_reference(const GatedDeltaNetParams& p, const GatedDeltaNetSequence& seq) {
  MB_CHECK(p.n_key_heads > 0 && p.n_value_heads % p.n_key_heads == 0 && p.key_dim > 0 && p.value_dim > 0);
  const int64_t nk = p.n_key_heads, nv = p.n_value_heads, dk = p.key_dim, dv = p.value_dim;
  const int64_t ratio = nv / nk;
  std::vector<double> S(seq.state, seq.state + p.state_floats());  // [nv, dv, dk]
  for (int64_t t = 0; t < seq.length; ++t) {
    const float* row = seq.qkv + t * seq.ldqkv;
    for (int64_t h = 0; h < nv; ++h) {
      const int64_t kh = p.tiled_heads ? h % nk : h / ratio;
      const std::vector<double> q = l2_normalized(row + kh * dk, dk, p.l2_eps, 1.0 / std::sqrt(double(dk)));
      const std::vector<double> k = l2_normalized(row + nk * dk + kh * dk, dk, p.l2_eps, 1.0);
      const float* v = row + 2 * nk * dk + h * dv;
      const double beta = 1.0 / (1.0 + std::exp(-static_cast<double>(seq.b[t * seq.ldb + h])));
      const double raw = static_cast<double>(seq.a[t * seq.lda + h]) + p.dt_bias[h];
      const double softplus = raw > 20.0 ? raw : std::log1p(std::exp(raw));
      const double decay = std::exp(static_cast<double>(p.a_neg[h]) * softplus);
      for (int64_t j = 0; j < dv; ++j) {
        double* s = S.data() + (h * dv + j) * dk;  // column j of S_h: its dk entries
        double read = 0.0;
        for (int64_t i = 0; i < dk; ++i) {
          s[i] *= decay;
          read += s[i] * k[i];
        }
        const double delta = beta * (v[j] - read);
        double out = 0.0;
        for (int64_t i = 0; i < dk; ++i) {
          s[i] += k[i] * delta;
          out += s[i] * q[i];
        }
        seq.y[t * seq.ldy + h * dv + j] = static_cast<float>(out);
      }
    }
  }
  for (size_t i = 0; i < S.size(); ++i) seq.state[i] = static_cast<float>(S[i]);
}

}  // namespace mb

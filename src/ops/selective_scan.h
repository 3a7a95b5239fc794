// SPDX-License-Identifier: MIT
// Mamba-1 selective scan with the D skip and the SiLU(z) gate, over a run of positions of one
// sequence, state carried in and out:
//   dA[n] = exp(dt * A[n]) = 2^(dt * A[n] log2(e));  h[n] = fma(dA[n], h[n], (dt * u) * B[n]);
//   y = sum_n h[n] * C[n]
//   y = fma(D, u, y);  out = y * silu(z)
// per channel, n ascending. Decays below 2^-64 are taken as 2^-64 (far below what an f32 state
// resolves; smaller ones would make decay * h subnormal, which slows x86 arithmetic ~100x). The same per-channel sequence of
// operations runs whether the positions come one per call (decode) or T per call (prefill); channels are
// vectorized sixteen at a time, which changes nothing within a channel.
#pragma once

#include <cstdint>
#include <span>

#include "core/threading.h"

namespace mb {

inline constexpr int kMaxStateSize = 256;

struct SelectiveScanArgs {
  int64_t length = 0;
  int64_t channels = 0;      // D (d_inner)
  int64_t d_state = 0;       // N, at most kMaxStateSize
  const float* u = nullptr;  // [length, ldu] conv outputs
  int64_t ldu = 0;
  const float* dt = nullptr;  // [length, lddt] softplus(dt_proj) already applied
  int64_t lddt = 0;
  const float* b = nullptr;  // [length, ldbc] B row of each position (N values)
  const float* c = nullptr;  // [length, ldbc] C row of each position
  int64_t ldbc = 0;
  const float* z = nullptr;  // [length, ldz] gate inputs, or null for no gate
  int64_t ldz = 0;
  // [N, channels] = A * log2(e) = -exp(A_log) * log2(e), state-major. The kernels take the decay
  // as 2^(dt * a_base2): a base-2 exponential needs no reduction by ln 2, which halves its cost.
  const float* a_base2 = nullptr;
  const float* d_skip = nullptr;  // [channels]
  float* state = nullptr;         // [N, channels], read and updated
  float* y = nullptr;             // [length, ldy]
  int64_t ldy = 0;
};

void selective_scan(const ComputeContext& ctx, std::span<const SelectiveScanArgs> sequences);
void selective_scan_reference(const SelectiveScanArgs& args);

}  // namespace mb

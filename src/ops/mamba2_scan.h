// SPDX-License-Identifier: MIT
// The Mamba-2 SSM between the causal conv and the gated norm (mamba_ssm's Mamba2 mixer): per head
// h of P channels, with B and C of group g = h / (H / G), over a run of positions of one sequence,
// the state carried in and out:
//   dt = min(max(softplus(dt_raw + dt_bias[h]), dt_min), dt_max)
//   decay = exp(dt * A[h]) = 2^(dt * A[h] log2(e))     (a scalar per head and position)
//   S[n][p] = fma(decay, S[n][p], (dt * x[p]) * B[n])  for n ascending
//   y[p] = sum_n S[n][p] * C[n], one FMA chain over n;  y[p] = fma(D, x[p], y[p])
// Decays below 2^-64 are taken as 2^-64, as in the Mamba-1 scan (subnormal decay * S is ~100x
// slower on x86 and far below what an f32 state resolves).
//
// Two evaluation orders are offered per sequence, as for Mamba-3:
//   - sequential: the recurrence above position after position. A decode step is the case of
//     one position, and T positions in one call give the same bits as T calls of one.
//   - chunked: the SSD form (the shared ssd_chunk kernel): per chunk of `chunk` positions, the
//     entering state's contribution and the causal in-chunk products as small matrix products,
//     then the state passed to the next chunk. Equal to the sequential order up to rounding.
// Work is split over (sequence, head) pairs, each of which runs its positions on one thread, so
// the result does not depend on the thread count, the batch, or the instruction set.
#pragma once

#include <cstdint>
#include <span>

#include "core/threading.h"

namespace mb {

struct Mamba2ScanParams {
  int64_t n_heads = 0;             // H
  int64_t headdim = 0;             // P
  int64_t d_state = 0;             // N, at most 256
  int64_t n_groups = 0;            // G; heads h use group h / (H / G)
  const float* dt_bias = nullptr;  // [H]
  // [H] = A * log2(e) = -exp(A_log) * log2(e): the sequential form takes the decay as a base-2
  // exponential, which needs no reduction by ln 2 (as the Mamba-1 scan).
  const float* a_base2 = nullptr;
  const float* a = nullptr;       // [H] = A = -exp(A_log): the chunked form sums log-decays dt * A
  const float* d_skip = nullptr;  // [H], or [H * P] when d_skip_per_channel
  bool d_skip_per_channel = false;
  float dt_min = 0.0f;  // the config's time_step_limit
  float dt_max = 0.0f;  // +infinity when unlimited
  int64_t chunk = 256;  // positions per SSD chunk (chunked sequences only)

  int64_t d_inner() const { return n_heads * headdim; }
  // Width of the conv output row: x [H * P], B [G * N], C [G * N].
  int64_t conv_width() const { return d_inner() + 2 * n_groups * d_state; }
};

// One sequence's positions for one layer.
struct Mamba2ScanSequence {
  int64_t length = 0;
  const float* xbc = nullptr;  // [length, ldxbc] conv + SiLU outputs: x | B | C
  int64_t ldxbc = 0;
  // [length, lddt] raw dt (the in_proj's dt columns). Read and written: replaced by the clamped
  // softplus(dt + dt_bias) of every head, which both scan orders then read.
  float* dt = nullptr;
  int64_t lddt = 0;
  float* state = nullptr;  // [H, N, P]: S[h][n][p] at (h * N + n) * P + p, read and updated
  float* y = nullptr;      // [length, ldy] SSM outputs with the D skip (d_inner columns), before the gate
  int64_t ldy = 0;
  bool chunked = false;  // SSD chunked order instead of the sequential recurrence
};

void mamba2_scan(const ComputeContext& ctx, const Mamba2ScanParams& params,
                 std::span<const Mamba2ScanSequence> sequences);

// Plain double-precision evaluation of the recurrence (tests only compare against it). `dt` is
// only read (raw values); `state` is updated like the engine's (in f32 storage).
void mamba2_scan_reference(const Mamba2ScanParams& params, const Mamba2ScanSequence& sequence);

}  // namespace mb

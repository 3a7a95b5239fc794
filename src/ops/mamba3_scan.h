// SPDX-License-Identifier: MIT
// The Mamba-3 SISO mixer between in_proj and out_proj (spec mamba3-siso.md §4 to §8.2, §10): BCNorm
// of B and C, the per-head activations, RoPE with the continued angle state, the trapezoidal
// recurrence, the D skip and the output gate, over a run of positions of one sequence with the
// four recurrent states carried in and out.
//
// Two evaluation orders of the same recurrence are offered per sequence:
//   - sequential: the per-token step of §7, one position after another. A decode step is the
//     case of one position, and T positions in one call give the same bits as T calls of one.
//   - chunked: the SSD form of §10 with chunks of `chunk` positions, starting from the carried
//     state through the boundary fold of §10.3. Equal to the sequential order up to rounding.
// Both produce the same per-token preprocessing (the same bits for k, q, dt, the angles and the
// final k, v and angle states); only the SSM state and y are summed in a different order.
//
// Work is split over (sequence, head) pairs, each of which runs all its positions on one thread,
// so the result does not depend on the thread count, the batch, or the instruction set.
#pragma once

#include <cstdint>
#include <span>

#include "core/threading.h"

namespace mb {

struct Mamba3ScanParams {
  int64_t n_heads = 0;               // H
  int64_t headdim = 0;               // P
  int64_t d_state = 0;               // N
  int64_t n_groups = 0;              // G; heads h use group h / (H / G)
  int64_t n_angles = 0;              // na = floor(floor(N * rope_fraction) / 2)
  const float* dt_bias = nullptr;    // [H]
  const float* b_bias = nullptr;     // [H, N]
  const float* c_bias = nullptr;     // [H, N]
  const float* b_norm = nullptr;     // [N] BCNorm weight of B, shared by all groups
  const float* c_norm = nullptr;     // [N]
  const float* d_skip = nullptr;     // [H]
  const float* gate_norm = nullptr;  // [H * P] grouped gated RMSNorm weight, or null for y * silu(z)
  float a_floor = 1e-4f;             // A <= -a_floor
  float eps = 1e-5f;                 // BCNorm and gated-norm epsilon
  int64_t chunk = 64;                // positions per SSD chunk (chunked sequences only)
  // Test-only switch: false drops the §10.3 boundary fold, which makes a chunked window that
  // starts from a nonzero state wrong at its first positions. Tests prove the fold matters.
  bool boundary_fold = true;

  int64_t d_inner() const { return n_heads * headdim; }
  // Width of one in_proj row: z, x, B, C, dd_dt, dd_A, trap, angles (spec §4).
  int64_t proj_width() const { return 2 * d_inner() + 2 * n_groups * d_state + 3 * n_heads + n_angles; }
};

// Offsets of the four states inside one layer's block of a sequence's state.
struct Mamba3StateLayout {
  int64_t ssm, k, v, angle, total;
};
inline Mamba3StateLayout mamba3_state_layout(const Mamba3ScanParams& p) {
  const int64_t H = p.n_heads, N = p.d_state, P = p.headdim;
  Mamba3StateLayout s;
  s.ssm = 0;                // [H, N, P]: S[h][p][n] of the spec at (h * N + n) * P + p
  s.k = s.ssm + H * N * P;  // [H, N] k of the last position (post-bias, post-RoPE, unscaled)
  s.v = s.k + H * N;        // [H, P] x of the last position
  s.angle = s.v + H * P;    // [H, max(na, 1)] RoPE phases in [0, 2pi]
  s.total = s.angle + H * (p.n_angles > 0 ? p.n_angles : 1);
  return s;
}

// One sequence's positions for one layer.
struct Mamba3ScanSequence {
  int64_t length = 0;
  // [length, ldp] in_proj outputs. Read and written: the B and C segments are replaced by their
  // BCNorm outputs and the angle segment by the angle velocities tanh(raw) * pi.
  float* proj = nullptr;
  int64_t ldp = 0;
  float* state = nullptr;  // the layer's block of the sequence's state (Mamba3StateLayout)
  float* y = nullptr;      // [length, ldy] gated outputs (d_inner columns), the input of out_proj
  int64_t ldy = 0;
  bool chunked = false;  // SSD chunked order instead of the sequential recurrence
};

void mamba3_scan(const ComputeContext& ctx, const Mamba3ScanParams& params,
                 std::span<const Mamba3ScanSequence> sequences);

// Plain double-precision evaluation of the sequential recurrence (tests only compare against
// it). `proj` is only read; `state` is updated like the engine's (in f32 storage).
void mamba3_scan_reference(const Mamba3ScanParams& params, const Mamba3ScanSequence& sequence);

}  // namespace mb

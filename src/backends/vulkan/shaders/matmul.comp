#version 450
// SPDX-License-Identifier: MIT
// The GEMM for few rows (decode), see matmul_common.glsl for what it computes. A workgroup
// covers one 64-wide weight panel (one invocation per output column, so weight loads of
// neighbouring invocations are contiguous) and kRows rows (x[m, k] is the same address for the
// whole workgroup, a broadcast load). Every row re-reads the panel, which costs nothing extra
// when m is a handful; matmul_tiled.comp serves many rows.
#include "matmul_common.glsl"

layout(local_size_x = 64) in;
const uint kRows = 4;

// The fused norm's lane sums of the workgroup's rows, then their inverse RMS, then slices of the
// normalized rows (normalized once per workgroup, not once per output column).
shared float lane_sums[kRows * kNormLanes];
shared float inverse[kRows];
shared float x_slice[kRows * kPanelWidth];  // [row][kk]

void main() {
  const uint panel = gl_WorkGroupID.x;
  const uint lane = gl_LocalInvocationID.x;
  const uint col = panel * kPanelWidth + lane;
  const uint row0 = gl_WorkGroupID.y * kRows;
  // Invocations past the last output (col >= n) still take part in the barriers; their weights
  // come from the panel's padding and their results are dropped.
  const uint slot = panel_slot(lane);
  float acc[kRows];
  for (uint i = 0u; i < kRows; ++i) acc[i] = 0.0;

  if (kFusedNorm) {
    // Invocation i * 16 + j plays lane j of row i's sum of squares; one invocation per row
    // then reduces them.
    const uint row = row0 + lane / kNormLanes;
    if (row < params.m) lane_sums[lane] = norm_lane_sum(row, lane % kNormLanes);
    barrier();
    if (lane < kRows && row0 + lane < params.m) {
      float lanes[kNormLanes];
      for (uint j = 0u; j < kNormLanes; ++j) lanes[j] = lane_sums[lane * kNormLanes + j];
      inverse[lane] = inverse_rms(lanes);
    }
    barrier();
    // K in slices of 64: invocation `lane` normalizes element k0 + lane of each row.
    for (uint k0 = 0u; k0 < params.k; k0 += kPanelWidth) {
      const uint depth = min(kPanelWidth, params.k - k0);
      for (uint i = 0u; i < kRows; ++i) {
        if (row0 + i < params.m && lane < depth)
          x_slice[i * kPanelWidth + lane] = input_value(row0 + i, k0 + lane, inverse[i]);
      }
      barrier();
      for (uint kk = 0u; kk < depth; ++kk) {
        const float wv = weight(panel, k0 + kk, slot);
        for (uint i = 0u; i < kRows; ++i) {
          if (row0 + i < params.m) acc[i] = mb_fma(x_slice[i * kPanelWidth + kk], wv, acc[i]);
        }
      }
      barrier();  // the next slice overwrites x_slice
    }
  } else {
    for (uint kk = 0u; kk < params.k; ++kk) {
      const float wv = weight(panel, kk, slot);
      for (uint i = 0u; i < kRows; ++i) {
        const uint row = row0 + i;
        if (row < params.m) acc[i] = mb_fma(x[params.x_offset + row * params.ldx + kk], wv, acc[i]);
      }
    }
  }
  if (col >= params.n) return;
  for (uint i = 0u; i < kRows; ++i) {
    const uint row = row0 + i;
    if (row >= params.m) break;
    store_output(row, col, acc[i]);
  }
}

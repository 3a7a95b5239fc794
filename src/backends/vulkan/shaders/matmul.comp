#version 450
// The GEMM for few rows (decode), see matmul_common.glsl for what it computes. A workgroup
// covers one 64-wide weight panel (one invocation per output column, so weight loads of
// neighbouring invocations are contiguous) and kRows rows (x[m, k] is the same address for the
// whole workgroup, a broadcast load). Every row re-reads the panel, which costs nothing extra
// when m is a handful; matmul_tiled.comp serves many rows.
#include "matmul_common.glsl"

layout(local_size_x = 64) in;
const uint kRows = 4;

// The fused norm's lane sums of the workgroup's rows, then their inverse RMS.
shared float lane_sums[kRows * kNormLanes];
shared float inverse[kRows];

void main() {
  const uint panel = gl_WorkGroupID.x;
  const uint lane = gl_LocalInvocationID.x;
  const uint col = panel * kPanelWidth + lane;
  const uint row0 = gl_WorkGroupID.y * kRows;

  if (params.has_norm != 0u) {
    // Invocation i * 16 + j plays lane j of row i's sum of squares; one invocation per row
    // then reduces them (the barriers sit outside any branch on the invocation).
    const uint row = row0 + lane / kNormLanes;
    if (row < params.m) lane_sums[lane] = norm_lane_sum(row, lane % kNormLanes);
    barrier();
    if (lane < kRows && row0 + lane < params.m) {
      float lanes[kNormLanes];
      for (uint j = 0u; j < kNormLanes; ++j) lanes[j] = lane_sums[lane * kNormLanes + j];
      inverse[lane] = inverse_rms(lanes);
    }
    barrier();
  }
  if (col >= params.n) return;
  const uint slot = panel_slot(lane);
  float inv[kRows];
  for (uint i = 0u; i < kRows; ++i) inv[i] = params.has_norm != 0u ? inverse[i] : 1.0;

  float acc[kRows];
  for (uint i = 0u; i < kRows; ++i) acc[i] = 0.0;
  for (uint kk = 0u; kk < params.k; ++kk) {
    const float wv = weight(panel, kk, slot);
    for (uint i = 0u; i < kRows; ++i) {
      const uint row = row0 + i;
      if (row < params.m) acc[i] = mb_fma(input_value(row, kk, inv[i]), wv, acc[i]);
    }
  }
  for (uint i = 0u; i < kRows; ++i) {
    const uint row = row0 + i;
    if (row >= params.m) break;
    store_output(row, col, acc[i]);
  }
}

#version 450
// The GEMM for many rows (prefill), see matmul_common.glsl for what it computes. A workgroup
// computes a tile of kTileRows rows by one 64-wide weight panel; each invocation holds a register
// block of kRowsPer rows by kColsPer columns. The tile walks K in steps of kTileK: the workgroup
// stages that slice of x (normalized, with the fused norm) and of the panel (decoded to f32) in
// shared memory, then every invocation advances its outputs' chains by those k in order. So
// each output is still the one chain acc = fma(x'[m, k], W[n, k], acc) for k = 0..K-1, while
// the panel is read from memory once per tile of rows instead of once per four rows.
//
// Rows and columns of a register block are strided (row ty + kRowGroups * i, column
// tx + 16 * j), so a partial tile of rows still spreads over every invocation, and neighbouring
// invocations read neighbouring columns. The row groups (local y) are a specialization constant
// the host fits to the device's workgroup limits.
#include "matmul_common.glsl"

layout(local_size_x = 16, local_size_y_id = 0) in;
layout(constant_id = 0) const uint kRowGroups = 16;
const uint kColumnGroups = 16;  // local x
const uint kRowsPer = 8;
const uint kColsPer = 4;  // kColumnGroups * kColsPer = kPanelWidth
const uint kTileK = 16;   // = kNormLanes, so the x tile can hold the norm's lane sums first
const uint kTileRows = kRowGroups * kRowsPer;
const uint kXStride = kTileRows + 1;  // padded: staging writes of consecutive k hit distinct banks

shared float x_tile[kTileK * kXStride];        // [kk][tile row]
shared float w_tile[kTileK * kPanelWidth];     // [kk][panel column], in column order
shared float inverse[kTileRows];               // the fused norm's 1 / rms per tile row

void main() {
  const uint panel = gl_WorkGroupID.x;
  const uint tx = gl_LocalInvocationID.x;
  const uint ty = gl_LocalInvocationID.y;
  const uint id = ty * kColumnGroups + tx;
  const uint invocations = kColumnGroups * kRowGroups;
  const uint row0 = gl_WorkGroupID.y * kTileRows;

  if (params.has_norm != 0u) {
    // Invocation (tx, ty) plays lane tx of the sums of squares of its rows; the lane sums of
    // tile row r sit at x_tile[r * 16 + lane] until one invocation per row reduces them.
    for (uint i = 0u; i < kRowsPer; ++i) {
      const uint r = ty + kRowGroups * i;
      if (row0 + r < params.m) x_tile[r * kNormLanes + tx] = norm_lane_sum(row0 + r, tx);
    }
    barrier();
    if (id < kTileRows && row0 + id < params.m) {  // invocations = 2 * kTileRows
      float lanes[kNormLanes];
      for (uint j = 0u; j < kNormLanes; ++j) lanes[j] = x_tile[id * kNormLanes + j];
      inverse[id] = inverse_rms(lanes);
    }
    barrier();
  }

  float acc[kRowsPer * kColsPer];
  for (uint i = 0u; i < kRowsPer * kColsPer; ++i) acc[i] = 0.0;
  for (uint k0 = 0u; k0 < params.k; k0 += kTileK) {
    const uint depth = min(kTileK, params.k - k0);
    // Consecutive invocations read consecutive k of one row of x, and consecutive slots of the
    // panel (which is contiguous over k), so both loads are coalesced.
    for (uint e = id; e < kTileK * kTileRows; e += invocations) {
      const uint r = e / kTileK;
      const uint kk = e % kTileK;
      float value = 0.0;
      if (row0 + r < params.m && kk < depth) {
        value = input_value(row0 + r, k0 + kk, params.has_norm != 0u ? inverse[r] : 1.0);
      }
      x_tile[kk * kXStride + r] = value;
    }
    for (uint e = id; e < kTileK * kPanelWidth; e += invocations) {
      const uint kk = e / kPanelWidth;
      const uint column = e % kPanelWidth;
      w_tile[kk * kPanelWidth + column] = kk < depth ? weight(panel, k0 + kk, panel_slot(column)) : 0.0;
    }
    barrier();
    for (uint kk = 0u; kk < depth; ++kk) {
      float wv[kColsPer];
      for (uint j = 0u; j < kColsPer; ++j) wv[j] = w_tile[kk * kPanelWidth + tx + kColumnGroups * j];
      for (uint i = 0u; i < kRowsPer; ++i) {
        const float xv = x_tile[kk * kXStride + ty + kRowGroups * i];
        for (uint j = 0u; j < kColsPer; ++j) acc[i * kColsPer + j] = mb_fma(xv, wv[j], acc[i * kColsPer + j]);
      }
    }
    barrier();  // the next slice overwrites the tiles
  }

  for (uint i = 0u; i < kRowsPer; ++i) {
    const uint row = row0 + ty + kRowGroups * i;
    if (row >= params.m) break;
    for (uint j = 0u; j < kColsPer; ++j) {
      const uint col = panel * kPanelWidth + tx + kColumnGroups * j;
      if (col < params.n) store_output(row, col, acc[i * kColsPer + j]);
    }
  }
}

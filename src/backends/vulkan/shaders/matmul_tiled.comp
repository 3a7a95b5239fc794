#version 450
// SPDX-License-Identifier: MIT
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
// invocations write neighbouring columns. The shared tiles are laid out so that each invocation's
// rows (and columns) of one k are adjacent: it reads them as two (one) four-float loads, and
// loads from shared memory stay well below the multiply-adds they feed (3 per 32). The row
// groups (local y) are a specialization constant the host fits to the device's workgroup limits.
#include "matmul_common.glsl"

layout(local_size_x = 16, local_size_y_id = 1) in;
layout(constant_id = 1) const uint kRowGroups = 16;
const uint kColumnGroups = 16;  // local x
const uint kRowsPer = 8;
const uint kColsPer = 4;  // kColumnGroups * kColsPer = kPanelWidth
const uint kTileK = 16;   // = kNormLanes, so the x tile can hold the norm's lane sums first
const uint kTileRows = kRowGroups * kRowsPer;
const uint kXStride = kTileRows + 4;  // floats per k of x_tile, padded against bank conflicts

// x_tile[kk][ty][i] holds x'[row0 + ty + kRowGroups * i, k0 + kk]; w_tile[kk][tx][j] holds the
// decoded W[column tx + 16 * j of the panel, k0 + kk]. Before the first slice x_tile holds the
// fused norm's lane sums instead, float r * 16 + lane for tile row r.
shared vec4 x_tile[kTileK * kXStride / 4];
shared vec4 w_tile[kTileK * kPanelWidth / 4];
shared float inverse[kTileRows];  // the fused norm's 1 / rms per tile row

void set_x_tile(uint index, float value) {
  x_tile[index / 4u][index % 4u] = value;
}

void main() {
  const uint panel = gl_WorkGroupID.x;
  const uint tx = gl_LocalInvocationID.x;
  const uint ty = gl_LocalInvocationID.y;
  const uint id = ty * kColumnGroups + tx;
  const uint invocations = kColumnGroups * kRowGroups;
  const uint row0 = gl_WorkGroupID.y * kTileRows;

  if (kFusedNorm) {
    // Invocation (tx, ty) plays lane tx of the sums of squares of its rows; the lane sums of
    // tile row r sit at x_tile[r * 16 + lane] until one invocation per row reduces them.
    for (uint i = 0u; i < kRowsPer; ++i) {
      const uint r = ty + kRowGroups * i;
      if (row0 + r < params.m) set_x_tile(r * kNormLanes + tx, norm_lane_sum(row0 + r, tx));
    }
    barrier();
    if (id < kTileRows && row0 + id < params.m) {  // invocations = 2 * kTileRows
      float lanes[kNormLanes];
      for (uint j = 0u; j < kNormLanes; ++j) lanes[j] = x_tile[(id * kNormLanes + j) / 4u][j % 4u];
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
        value = input_value(row0 + r, k0 + kk, kFusedNorm ? inverse[r] : 1.0);
      }
      set_x_tile(kk * kXStride + (r % kRowGroups) * kRowsPer + r / kRowGroups, value);
    }
    for (uint e = id; e < kTileK * kPanelWidth; e += invocations) {
      const uint kk = e / kPanelWidth;
      const uint column = e % kPanelWidth;
      const uint at = kk * kPanelWidth + (column % kColumnGroups) * kColsPer + column / kColumnGroups;
      w_tile[at / 4u][at % 4u] = kk < depth ? weight(panel, k0 + kk, panel_slot(column)) : 0.0;
    }
    barrier();
    for (uint kk = 0u; kk < depth; ++kk) {
      const vec4 wv = w_tile[(kk * kPanelWidth + tx * kColsPer) / 4u];
      const uint x_at = (kk * kXStride + ty * kRowsPer) / 4u;
      const vec4 x_low = x_tile[x_at], x_high = x_tile[x_at + 1u];
      for (uint i = 0u; i < kRowsPer; ++i) {
        const float xv = i < 4u ? x_low[i] : x_high[i - 4u];
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

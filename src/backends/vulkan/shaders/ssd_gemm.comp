#version 450
// SPDX-License-Identifier: MIT
// The matrix products of one chunk of the SSD form (src/ops/cpu/ssd_chunk.inc's ssd_chunk) for
// every (chunk, head) batch of the op at once, with the CPU's bits: each output is one fma chain
// acc = 0; acc = fma(A[i][k], B[k][j], acc) for k ascending, then the epilogue of the mode
// (a specialization constant), each as the CPU computes it:
//   0 M:     M[i][s] = s < i ? acc * exp(cum_i - cum_s) : 0     (A = Q, B = Kt, k over N)
//   1 Intra: Intra[i][p] = acc                                   (A = M, B = V, k < K_i)
//            with K_i = min(4 floor(i / 4) + 4, Lc) - 1, the columns the CPU's block of four rows
//            containing i multiplies (its extra terms are products with M's zeros)
//   2 dH:    dH[n][p] = acc                                      (A = Ktw, B = V, k < Lc)
//   3 Y:     Y = acc * exp(cum_i); Y = Y + Intra (when Lc > 1); Y = fma(diag_i, v_i, Y)
//            (A = Q, B = Hent, k over N), then Mamba-2's D per channel, y = fma(D, v, Y),
//            written to the op's y rows
//   4 Y:     as 3, into Ypre for Mamba-3's gate
// A workgroup computes a 16 x 16 tile of one batch (workgroup z), staging 16-deep slices of A and
// B in shared memory; its 128 invocations each hold two outputs (rows ty and ty + 8).
#include "mb_math.glsl"

layout(local_size_x = 16, local_size_y = 8) in;
layout(constant_id = 0) const uint kMode = 0;

#include "ssd_layout.glsl"

layout(std430, set = 0, binding = 0) buffer Scratch { float scratch[]; };           // batches from 0
layout(std430, set = 0, binding = 1) readonly buffer Tables { uint tables[]; };     // chunks at chunks_at
layout(std430, set = 0, binding = 2) writeonly buffer Y { float y[]; };             // [rows, ldy] (mode 3)
layout(std430, set = 0, binding = 3) readonly buffer Skip { float d_skip[]; };      // [H * P] (mode 3)

layout(push_constant) uniform Params {
  uint chunk, states, headdim;  // L, N, P
  uint head_begin, head_count;  // the batches are (chunk g, head head_begin + h) at g * head_count + h
  uint chunks_at;
  uint ldy, y_offset, d_offset, d_per_channel;
} params;

const uint kTile = 16;
shared float a_tile[kTile][kTile + 1];  // [row][k]
shared float b_tile[kTile][kTile];      // [k][column]

void main() {
  const uint kChunk = params.chunk, kStates = params.states, kHeaddim = params.headdim;
  const SsdLayout s = ssd_layout(kChunk, kStates, kHeaddim);
  const uint batch = gl_WorkGroupID.z;
  const uint g = batch / params.head_count;
  const uint h = params.head_begin + batch % params.head_count;
  const uint base = batch * s.batch;
  const uint chunk_row = tables[params.chunks_at + 4u * g + 1u];
  const uint length = tables[params.chunks_at + 4u * g + 2u];
  // The product's shape: rows, columns, depth (the deepest row's, for mode 1), operands.
  uint rows = length, columns = kHeaddim, depth = kStates, a_at = s.q, lda = kStates, b_at = s.hent, ldb = kHeaddim;
  if (kMode == 0u) {
    columns = length; b_at = s.kt; ldb = kChunk;
  } else if (kMode == 1u) {
    depth = length - 1u; a_at = s.m; lda = kChunk; b_at = s.v;
  } else if (kMode == 2u) {
    rows = kStates; depth = length; a_at = s.ktw; lda = kChunk; b_at = s.v;
  }
  const uint row0 = gl_WorkGroupID.y * kTile, column0 = gl_WorkGroupID.x * kTile;
  if (row0 >= rows || column0 >= columns) return;  // uniform over the workgroup
  const uint tx = gl_LocalInvocationID.x, ty = gl_LocalInvocationID.y;
  const uint column = column0 + tx;
  uint row_depth[2];
  precise float acc[2];
  for (uint r = 0u; r < 2u; ++r) {
    const uint i = row0 + ty + 8u * r;
    row_depth[r] = kMode == 1u ? min(4u * (i / 4u) + 4u, length) - 1u : depth;
    acc[r] = 0.0;
  }
  for (uint k0 = 0u; k0 < depth; k0 += kTile) {
    for (uint e = ty * kTile + tx; e < kTile * kTile; e += 128u) {
      const uint r = e / kTile, k = e % kTile;
      const bool inside_a = row0 + r < rows && k0 + k < depth;
      a_tile[r][k] = inside_a ? scratch[base + a_at + (row0 + r) * lda + k0 + k] : 0.0;
      const bool inside_b = k0 + r < depth && column0 + k < columns;
      b_tile[r][k] = inside_b ? scratch[base + b_at + (k0 + r) * ldb + column0 + k] : 0.0;
    }
    barrier();
    for (uint r = 0u; r < 2u; ++r) {
      const uint kend = min(kTile, row_depth[r] > k0 ? row_depth[r] - k0 : 0u);
      for (uint k = 0u; k < kend; ++k) acc[r] = mb_fma(a_tile[ty + 8u * r][k], b_tile[k][tx], acc[r]);
    }
    barrier();
  }
  if (column >= columns) return;
  for (uint r = 0u; r < 2u; ++r) {
    const uint i = row0 + ty + 8u * r;
    if (i >= rows) continue;
    if (kMode == 0u) {
      precise float gap = scratch[base + s.rows + kRowFloats * i + kRowCum] - scratch[base + s.rows + kRowFloats * column + kRowCum];
      precise float decayed = acc[r] * mb_exp(gap);
      scratch[base + s.m + i * kChunk + column] = column < i ? decayed : 0.0;
    } else if (kMode == 1u) {
      scratch[base + s.intra + i * kHeaddim + column] = acc[r];
    } else if (kMode == 2u) {
      scratch[base + s.dh + i * kHeaddim + column] = acc[r];
    } else {
      precise float out_value = acc[r] * scratch[base + s.rows + kRowFloats * i + kRowExpCum];
      if (length > 1u) out_value = out_value + scratch[base + s.intra + i * kHeaddim + column];
      const float v = scratch[base + s.v + i * kHeaddim + column];
      out_value = mb_fma(scratch[base + s.rows + kRowFloats * i + kRowDiag], v, out_value);
      if (kMode == 3u) {
        if (params.d_per_channel != 0u) out_value = mb_fma(d_skip[params.d_offset + h * kHeaddim + column], v, out_value);
        y[params.y_offset + (chunk_row + i) * params.ldy + h * kHeaddim + column] = out_value;
      } else {
        scratch[base + s.ypre + i * kHeaddim + column] = out_value;
      }
    }
  }
}

#version 450
// SPDX-License-Identifier: MIT
// The quantized GEMM for many rows (prefill) of src/ops/quant_matmul.h with the CPU kernels' bits
// (quant_format.glsl): y = x' W^T (+ bias), then softplus or y += result, from the rows' levels,
// scales and sums that quant_rows.comp wrote into the scratch buffer.
//
// A workgroup computes a tile of kTileRows rows by one panel of 16 outputs; invocation (tx, ty)
// holds output tx of rows ty + kRowGroups * i (i < 8, strided so that a partial tile still spreads
// over every invocation). The tile walks K in steps of 256 weights (one K-quant block, or eight
// 32-weight blocks): the workgroup decodes the panel's tiles of the step once into level words in
// shared memory (the weights are read from memory once per tile of rows, not once per row) and
// stages the rows' levels, scales and sums; then every invocation forms its outputs' exact
// integer sums, sub-block by sub-block, and adds each block's term to its outputs' sums in block
// order, the CPU's one chain.
layout(local_size_x = 16, local_size_y_id = 1) in;
layout(constant_id = 0) const uint kType = 0u;  // quant_format.glsl's kQ8_0 .. kQ6_K
layout(constant_id = 1) const uint kRowGroups = 8u;
const uint kRowsPer = 8u;
const uint kTileRows = kRowGroups * kRowsPer;
const uint kInvocations = 16u * kRowGroups;
const uint kXStride = 65u;  // words per staged row, padded against bank conflicts

layout(std430, set = 0, binding = 0) readonly buffer Xq { uint xq[]; };     // quant_rows.comp's output
layout(std430, set = 0, binding = 1) readonly buffer W { uint w_words[]; };  // tiles from w_offset
layout(std430, set = 0, binding = 2) readonly buffer Bias { float bias[]; }; // [n] from bias_offset
layout(std430, set = 0, binding = 3) buffer Y { float y[]; };                // [m, ldy] from y_offset

layout(push_constant) uniform Params {
  uint m, n, k, ldy;
  uint y_offset, bias_offset;
  uint w_offset;  // in words
  uint has_bias, accumulate, softplus;
  uint q_offset, dx_offset, sum_offset;  // quant_rows.comp's arrays in Xq, in words
} params;

#include "quant_format.glsl"

shared uint levels[kStepWords * kQuantPanel];   // level word j of lane l at j * 16 + l
shared uint x_levels[kTileRows * kXStride];     // word j of tile row r at r * kXStride + j
shared float x_dx[kTileRows * kBlocksPerStep];  // dx of block j of the step of tile row r
shared int x_sums[kTileRows * 16u];             // X of the 16 values 16g.. of the step of tile row r
shared float w_d[kBlocksPerStep * kQuantPanel]; // d of block j of lane l at j * 16 + l
shared float w_dmin[kQuantPanel];
shared int w_scales[kSubBlocks * kQuantPanel];  // sub-block s of lane l at s * 16 + l
shared int w_mins[(kType == kQ4_K ? 8u : 1u) * kQuantPanel];

// The epilogue of one output: + bias, softplus, or y + result (as matmul_common.glsl).
void store_output(uint row, uint col, float acc) {
  precise float result = acc;
  if (params.has_bias != 0u) result = result + bias[params.bias_offset + col];
  if (params.softplus != 0u) result = mb_softplus(result);
  const uint at = params.y_offset + row * params.ldy + col;
  if (params.accumulate != 0u) result = y[at] + result;
  y[at] = result;
}

// Decodes the panel's tiles of step `step` and stages the tile rows' activations.
void stage(uint step, uint id, uint row0, uint first_tile, uint blocks) {
  for (uint e = id; e < kStepWords * kQuantPanel; e += kInvocations) {
    const uint lane = e % kQuantPanel, j = e / kQuantPanel;
    const uint b = step * kBlocksPerStep + j / kBlockWords;
    if (b < blocks) levels[e] = level_word(first_tile + b * kTileWords, lane, j % kBlockWords);
  }
  for (uint e = id; e < kBlocksPerStep * kQuantPanel; e += kInvocations) {
    const uint b = step * kBlocksPerStep + e / kQuantPanel;
    if (b < blocks) w_d[e] = lane_d(first_tile + b * kTileWords, e % kQuantPanel);
  }
  if (!kSmallBlocks) {
    const uint tile = first_tile + step * kTileWords;
    for (uint e = id; e < kSubBlocks * kQuantPanel; e += kInvocations) {
      w_scales[e] = lane_scale(tile, e % kQuantPanel, e / kQuantPanel);
      if (kType == kQ4_K) w_mins[e] = lane_min(tile, e % kQuantPanel, e / kQuantPanel);
    }
    if (kType == kQ4_K && id < kQuantPanel) w_dmin[id] = lane_dmin(tile, id);
  }
  const uint words = params.k / 4u, groups = params.k / 16u;
  for (uint e = id; e < kTileRows * kStepWords; e += kInvocations) {
    const uint r = e / kStepWords, j = step * kStepWords + e % kStepWords;
    if (row0 + r < params.m && j < words)
      x_levels[r * kXStride + e % kStepWords] = xq[params.q_offset + (row0 + r) * words + j];
  }
  for (uint e = id; e < kTileRows * kBlocksPerStep; e += kInvocations) {
    const uint r = e / kBlocksPerStep, b = step * kBlocksPerStep + e % kBlocksPerStep;
    if (row0 + r < params.m && b < blocks) x_dx[e] = uintBitsToFloat(xq[params.dx_offset + (row0 + r) * blocks + b]);
  }
  for (uint e = id; e < kTileRows * 16u; e += kInvocations) {
    const uint r = e / 16u, g = step * 16u + e % 16u;
    if (row0 + r < params.m && g < groups) x_sums[e] = int(xq[params.sum_offset + (row0 + r) * groups + g]);
  }
}

void main() {
  const uint panel = gl_WorkGroupID.x;
  const uint tx = gl_LocalInvocationID.x, ty = gl_LocalInvocationID.y;
  const uint id = ty * kQuantPanel + tx;
  const uint row0 = gl_WorkGroupID.y * kTileRows;
  const uint blocks = params.k / kBlock;
  const uint first_tile = params.w_offset + panel * blocks * kTileWords;
  uint tile_row[kRowsPer];
  for (uint i = 0u; i < kRowsPer; ++i) tile_row[i] = ty + kRowGroups * i;

  precise float acc[kRowsPer];
  for (uint i = 0u; i < kRowsPer; ++i) acc[i] = 0.0;
  for (uint step = 0u; step * kStepWeights < params.k; ++step) {
    stage(step, id, row0, first_tile, blocks);
    barrier();
    for (uint jb = 0u; jb < kBlocksPerStep && step * kBlocksPerStep + jb < blocks; ++jb) {
      int main_sum[kRowsPer], min_sum[kRowsPer];
      for (uint i = 0u; i < kRowsPer; ++i) {
        main_sum[i] = 0;
        min_sum[i] = 0;
      }
      for (uint s = 0u; s < kSubBlocks; ++s) {
        int dot[kRowsPer];
        for (uint i = 0u; i < kRowsPer; ++i) dot[i] = 0;
        for (uint w = 0u; w < kSubWords; ++w) {
          const uint j = jb * kBlockWords + s * kSubWords + w;
          const uint level = levels[j * kQuantPanel + tx];
          for (uint i = 0u; i < kRowsPer; ++i) dot[i] += dot4(level, x_levels[tile_row[i] * kXStride + j]);
        }
        for (uint i = 0u; i < kRowsPer; ++i) {
          // X of the sub-block: one sum of 16 (Q6_K) or two (32-value sub-blocks and blocks).
          const uint g = kType == kQ6_K ? s : kType == kQ4_K ? 2u * s : 2u * jb;
          const int level_sum =
              kType == kQ6_K ? x_sums[tile_row[i] * 16u + g] : x_sums[tile_row[i] * 16u + g] + x_sums[tile_row[i] * 16u + g + 1u];
          const int sum = dot[i] - kOffset * level_sum;
          if (kSmallBlocks) {
            main_sum[i] = sum;
          } else {
            main_sum[i] += w_scales[s * kQuantPanel + tx] * sum;
            if (kType == kQ4_K) min_sum[i] += w_mins[s * kQuantPanel + tx] * level_sum;
          }
        }
      }
      const float d = w_d[jb * kQuantPanel + tx];
      const float dmin = kType == kQ4_K ? w_dmin[tx] : 0.0;
      for (uint i = 0u; i < kRowsPer; ++i)
        acc[i] = acc[i] + block_term(main_sum[i], min_sum[i], d, dmin, x_dx[tile_row[i] * kBlocksPerStep + jb]);
    }
    barrier();  // the next step overwrites the staged tiles
  }

  const uint n = panel * kQuantPanel + tx;
  if (n >= params.n) return;
  for (uint i = 0u; i < kRowsPer; ++i) {
    const uint row = row0 + tile_row[i];
    if (row >= params.m) break;
    store_output(row, n, acc[i]);
  }
}

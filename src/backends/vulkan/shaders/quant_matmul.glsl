// SPDX-License-Identifier: MIT
// The quantized GEMV (decode: up to 8 rows) of src/ops/quant_matmul.h with the CPU kernels' bits:
// y = x' W^T (+ bias), then softplus or y += result, where x' is x or, with the fused norm, its
// RMSNorm (ops/rms_norm.h's bits), and W holds Q8_0, Q4_0, Q4_K or Q6_K tiles
// (quant_format.glsl).
//
// One workgroup of 64 invocations per panel of 16 outputs and kRows rows. Four consecutive
// invocations (a "quad") share an output: each reads its own quarter of every tile, so the
// quads of a workgroup read each tile word once, in 32-byte runs (eight outputs' words of one
// chunk). The workgroup walks K in steps of 256 values:
// 1. each invocation loads its words of the step's tiles into registers (the loads are in flight
//    while the step's activations are quantized);
// 2. the step's activations of the kRows rows are quantized into shared memory
//    (quant_activations.glsl: the rows are quantized inside the GEMV, not by a dispatch of their own);
// 3. the quad's integer dot products: in a K-quant block each invocation sums its quarter of the
//    sub-blocks (I and J are integers: exact in any split), and the quad adds its four partial
//    sums; of the eight 32-weight blocks of a Q8_0/Q4_0 step, invocation p of a quad computes the
//    terms of blocks 2p and 2p + 1, and the quad passes all eight terms round;
// 4. every invocation of the quad adds the block terms to its output's sum in block order (the
//    CPU's one chain), so the quad holds the same sum and its first invocation stores it.
// The quad's exchanges are subgroup shuffles where the quad lies in one subgroup (built with
// MB_SUBGROUP, subgroups of at least 4 that tile the workgroup), else shared memory.
//
// Included by quant_matmul.comp (shared-memory exchanges) and quant_matmul_subgroup.comp.
#include "mb_subgroup.glsl"

layout(local_size_x = 64) in;
layout(constant_id = 0) const bool kFusedNorm = false;
layout(constant_id = 1) const uint kType = 0u;  // quant_format.glsl's kQ8_0 .. kQ6_K
layout(constant_id = 2) const uint kRows = 1u;  // rows per workgroup: 1, 2, 4 or 8

layout(std430, set = 0, binding = 0) readonly buffer X { float x[]; };          // [m, ldx] from x_offset
layout(std430, set = 0, binding = 1) readonly buffer W { uint w_words[]; };     // tiles from w_offset
layout(std430, set = 0, binding = 2) readonly buffer Bias { float bias[]; };    // [n] from bias_offset
layout(std430, set = 0, binding = 3) buffer Y { float y[]; };                   // [m, ldy] from y_offset
layout(std430, set = 0, binding = 4) readonly buffer Norm { float norm_w[]; };  // [k] from norm_offset

layout(push_constant) uniform Params {
  uint m, n, k;
  uint ldx, ldy;
  uint x_offset, y_offset, bias_offset;
  uint w_offset;  // in words
  uint has_bias, accumulate, softplus;
  uint norm_offset;
  float norm_eps;
} params;

#include "quant_format.glsl"

const uint kQRows = kRows;
const uint kActBlock = kBlock;
const uint kNormLanes = 16u;

shared float norm_lanes[kRows * kNormLanes];
shared float norm_inverse[kRows];
uint row0 = 0u;  // the workgroup's first row

float qa_input(uint r, uint kk) {
  const float value = x[params.x_offset + (row0 + r) * params.ldx + kk];
  if (!kFusedNorm) return value;
  precise float scaled = (value * norm_inverse[r]) * norm_w[params.norm_offset + kk];
  return scaled;
}

#include "quant_activations.glsl"

// The quad's exchanges through shared memory: every invocation's partial I and J (K-quants) or
// two block terms (Q8_0/Q4_0) per row.
shared int quad_ints[2u * kRows * 64u];
shared float quad_terms[2u * kRows * 64u];

uint linear = 0u;       // this invocation's number: a quad is linear 4i .. 4i + 3
bool shuffles = false;  // whether the quad lies in one subgroup

// The sum over the quad of each row's (I, J), in place.
void quad_sums(inout int i_sum[kRows], inout int j_sum[kRows]) {
#ifdef MB_SUBGROUP
  if (shuffles) {
    for (uint r = 0u; r < kRows; ++r) {
      i_sum[r] += subgroupShuffleXor(i_sum[r], 1u);
      i_sum[r] += subgroupShuffleXor(i_sum[r], 2u);
      if (kType == kQ4_K) {
        j_sum[r] += subgroupShuffleXor(j_sum[r], 1u);
        j_sum[r] += subgroupShuffleXor(j_sum[r], 2u);
      }
    }
    return;
  }
#endif
  // The previous exchange was read before the barriers of this step's quantization.
  for (uint r = 0u; r < kRows; ++r) {
    quad_ints[(2u * r) * 64u + linear] = i_sum[r];
    quad_ints[(2u * r + 1u) * 64u + linear] = j_sum[r];
  }
  barrier();
  const uint first = linear & ~3u;
  for (uint r = 0u; r < kRows; ++r) {
    int i_total = 0, j_total = 0;
    for (uint p = 0u; p < 4u; ++p) {
      i_total += quad_ints[(2u * r) * 64u + first + p];
      j_total += quad_ints[(2u * r + 1u) * 64u + first + p];
    }
    i_sum[r] = i_total;
    j_sum[r] = j_total;
  }
}

// Term j (0..7) of a Q8_0/Q4_0 step for each row: invocation j / 2 of the quad holds it in slot
// j % 2 of `terms`.
void quad_terms_of(float terms[kRows][2], out float all_terms[kRows][8]) {
#ifdef MB_SUBGROUP
  if (shuffles) {
    const uint first = gl_SubgroupInvocationID & ~3u;
    for (uint r = 0u; r < kRows; ++r)
      for (uint j = 0u; j < 8u; ++j) all_terms[r][j] = subgroupShuffle(terms[r][j % 2u], first | (j / 2u));
    return;
  }
#endif
  for (uint r = 0u; r < kRows; ++r) {
    quad_terms[(2u * r) * 64u + linear] = terms[r][0];
    quad_terms[(2u * r + 1u) * 64u + linear] = terms[r][1];
  }
  barrier();
  const uint first = linear & ~3u;
  for (uint r = 0u; r < kRows; ++r)
    for (uint j = 0u; j < 8u; ++j) all_terms[r][j] = quad_terms[(2u * r + j % 2u) * 64u + first + j / 2u];
}

// Lane `lane` of row `row`'s sum of squares, the CPU's lane order (as matmul_common.glsl).
float norm_lane_sum(uint row, uint lane) {
  const uint x_row = params.x_offset + row * params.ldx;
  precise float acc = 0.0;
  for (uint kk = lane; kk < params.k; kk += kNormLanes) acc = mb_fma(x[x_row + kk], x[x_row + kk], acc);
  return acc;
}

// The epilogue of one output: + bias, softplus, or y + result (as matmul_common.glsl).
void store_output(uint row, uint col, float acc) {
  precise float result = acc;
  if (params.has_bias != 0u) result = result + bias[params.bias_offset + col];
  if (params.softplus != 0u) result = mb_softplus(result);
  const uint at = params.y_offset + row * params.ldy + col;
  if (params.accumulate != 0u) result = y[at] + result;
  y[at] = result;
}

// Words of its tiles one invocation reads per step: Q8_0 two blocks of 8 words, Q4_0 two of 4,
// Q4_K 8 of 32, Q6_K 8 low and 4 high of 48.
const uint kPhaseWords = kType == kQ8_0 ? 16u : kType == kQ6_K ? 12u : 8u;
const uint kLowNibbles = 0x0f0f0f0fu;

void main() {
#ifdef MB_SUBGROUP
  if (gl_SubgroupSize >= 4u && gl_NumSubgroups * gl_SubgroupSize == 64u) {
    linear = gl_SubgroupID * gl_SubgroupSize + gl_SubgroupInvocationID;
    shuffles = true;
  } else {
    linear = gl_LocalInvocationIndex;
  }
#else
  linear = gl_LocalInvocationIndex;
#endif
  const uint panel = gl_WorkGroupID.x;
  row0 = gl_WorkGroupID.y * kRows;
  const uint rows = min(kRows, params.m - row0);
  const uint lane = linear / 4u, phase = linear % 4u;
  const uint blocks = params.k / kBlock;
  const uint first_tile = params.w_offset + panel * blocks * kTileWords;

  qa_begin(linear);
  if (kFusedNorm) {
    for (uint e = linear; e < kRows * kNormLanes; e += 64u)
      if (e / kNormLanes < rows) norm_lanes[e] = norm_lane_sum(row0 + e / kNormLanes, e % kNormLanes);
    barrier();
    if (linear < rows) {
      float lanes[kNormLanes];
      for (uint j = 0u; j < kNormLanes; ++j) lanes[j] = norm_lanes[linear * kNormLanes + j];
      norm_inverse[linear] = mb_inverse_rms(lanes, params.k, params.norm_eps);
    }
  }
  barrier();

  precise float acc[kRows];
  for (uint r = 0u; r < kRows; ++r) acc[r] = 0.0;
  for (uint step = 0u; step * kStepWeights < params.k; ++step) {
    // 1. This invocation's tile words, and its scales, before the quantization's barriers.
    uint words[kPhaseWords];
    float d[2], dmin = 0.0;
    int scales[4], mins[2];
    if (kSmallBlocks) {
      // Blocks 2 phase and 2 phase + 1 of the step (those past the last block read nothing).
      for (uint t = 0u; t < 2u; ++t) {
        const uint b = step * kBlocksPerStep + 2u * phase + t;
        const uint tile = first_tile + min(b, blocks - 1u) * kTileWords;
        d[t] = b < blocks ? lane_d(tile, lane) : 0.0;
        for (uint c = 0u; c < kPhaseWords / 2u; ++c)
          words[t * (kPhaseWords / 2u) + c] = b < blocks ? w_words[tile + kLevelWords + 16u * c + lane] : 0u;
      }
    } else {
      const uint tile = first_tile + step * kTileWords;
      d[0] = lane_d(tile, lane);
      if (kType == kQ4_K) {
        // Chunks 8 phase .. 8 phase + 7: sub-blocks `phase` (low nibbles) and 4 + phase (high).
        dmin = lane_dmin(tile, lane);
        scales[0] = lane_scale(tile, lane, phase);
        scales[1] = lane_scale(tile, lane, 4u + phase);
        mins[0] = lane_min(tile, lane, phase);
        mins[1] = lane_min(tile, lane, 4u + phase);
        for (uint t = 0u; t < 8u; ++t) words[t] = w_words[tile + kLevelWords + 16u * (8u * phase + t) + lane];
      } else {
        // High-bit chunks h = 4 phase .. 4 phase + 3 and the low chunks h and 16 + h they
        // complete: sub-blocks phase, 4 + phase, 8 + phase and 12 + phase.
        for (uint u = 0u; u < 4u; ++u) scales[u] = lane_scale(tile, lane, 4u * u + phase);
        for (uint t = 0u; t < 4u; ++t) {
          const uint h = 4u * phase + t;
          words[t] = w_words[tile + kHighWords + 16u * h + lane];
          words[4u + t] = w_words[tile + kLevelWords + 16u * h + lane];
          words[8u + t] = w_words[tile + kLevelWords + 16u * (16u + h) + lane];
        }
      }
    }

    // 2. The step's activations.
    qa_step(linear, step, params.k, rows);

    // 3 and 4. The quad's dot products, and the terms added in block order.
    if (kSmallBlocks) {
      float terms[kRows][2];
      for (uint r = 0u; r < kRows; ++r) {
        for (uint t = 0u; t < 2u; ++t) {
          terms[r][t] = 0.0;
          const uint j = 2u * phase + t;  // the block within the step
          if (r >= rows || step * kBlocksPerStep + j >= blocks) continue;
          int s = 0;
          if (kType == kQ8_0) {
            for (uint c = 0u; c < 8u; ++c) s += dot4(words[8u * t + c], qa_q[r * 64u + 8u * j + c]);
          } else {
            for (uint c = 0u; c < 4u; ++c) {
              const uint w = words[4u * t + c];
              s += dot4(w & kLowNibbles, qa_q[r * 64u + 8u * j + c]) +
                   dot4((w >> 4) & kLowNibbles, qa_q[r * 64u + 8u * j + 4u + c]);
            }
          }
          const int level_sum = qa_sum16(step, r, 2u * j) + qa_sum16(step, r, 2u * j + 1u);
          terms[r][t] = block_term(s - kOffset * level_sum, 0, d[t], 0.0, qa_dx[r * kQaBlocks + j]);
        }
      }
      float all_terms[kRows][8];
      quad_terms_of(terms, all_terms);
      for (uint r = 0u; r < kRows; ++r)
        for (uint j = 0u; j < kBlocksPerStep && step * kBlocksPerStep + j < blocks; ++j)
          acc[r] = acc[r] + all_terms[r][j];
    } else {
      int i_sum[kRows], j_sum[kRows];
      for (uint r = 0u; r < kRows; ++r) {
        i_sum[r] = 0;
        j_sum[r] = 0;
        if (r >= rows) continue;
        const uint xr = r * 64u;
        if (kType == kQ4_K) {
          int low = 0, high = 0;
          for (uint t = 0u; t < 8u; ++t) {
            const uint c = 8u * phase + t;
            low += dot4(words[t] & kLowNibbles, qa_q[xr + c]);
            high += dot4((words[t] >> 4) & kLowNibbles, qa_q[xr + 32u + c]);
          }
          i_sum[r] = scales[0] * low + scales[1] * high;
          // X of 32-value sub-block s is the sum of its two sums of 16.
          const int x_low = qa_sum16(step, r, 2u * phase) + qa_sum16(step, r, 2u * phase + 1u);
          const int x_high = qa_sum16(step, r, 8u + 2u * phase) + qa_sum16(step, r, 9u + 2u * phase);
          j_sum[r] = mins[0] * x_low + mins[1] * x_high;
        } else {
          int s[4] = {0, 0, 0, 0};  // sub-blocks phase, 4 + phase, 8 + phase, 12 + phase
          for (uint t = 0u; t < 4u; ++t) {
            const uint h = 4u * phase + t;
            const uint high = words[t], low0 = words[4u + t], low1 = words[8u + t];
            s[0] += dot4((low0 & kLowNibbles) | ((high & 0x03030303u) << 4), qa_q[xr + h]);
            s[1] += dot4((low1 & kLowNibbles) | ((high << 2) & 0x30303030u), qa_q[xr + 16u + h]);
            s[2] += dot4(((low0 >> 4) & kLowNibbles) | (high & 0x30303030u), qa_q[xr + 32u + h]);
            s[3] += dot4(((low1 >> 4) & kLowNibbles) | ((high >> 2) & 0x30303030u), qa_q[xr + 48u + h]);
          }
          for (uint u = 0u; u < 4u; ++u)
            i_sum[r] += scales[u] * (s[u] - kOffset * qa_sum16(step, r, 4u * u + phase));
        }
      }
      quad_sums(i_sum, j_sum);
      for (uint r = 0u; r < kRows; ++r)
        if (r < rows) acc[r] = acc[r] + block_term(i_sum[r], j_sum[r], d[0], dmin, qa_dx[r * kQaBlocks]);
    }
  }

  const uint n = panel * kQuantPanel + lane;
  if (phase != 0u || n >= params.n) return;
  for (uint r = 0u; r < rows; ++r) store_output(row0 + r, n, acc[r]);
}

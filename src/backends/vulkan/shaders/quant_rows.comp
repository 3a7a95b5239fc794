#version 450
// SPDX-License-Identifier: MIT
// The activation rows of a quantized prefill GEMM (quant_matmul_tiled.comp), quantized once per
// product rather than once per panel: per row, x' (x, or with the fused norm its RMSNorm with
// ops/rms_norm.h's bits) is quantized as quant_activations.glsl describes, which the GEMV runs too,
// so both give the CPU's levels. One workgroup of 64 invocations per row; it writes into the
// recording's scratch buffer (words from the push constants' offsets):
//   levels [m][k / 4] (four int8 per word, low byte first) | dx [m][k / block] (f32 bits)
//   | X [m][k / 16] (the sums of 16 levels)
layout(local_size_x = 64) in;
layout(constant_id = 0) const bool kFusedNorm = false;
layout(constant_id = 1) const uint kActBlock = 32u;  // 32 or 256 values per activation scale

#include "mb_math.glsl"

layout(std430, set = 0, binding = 0) readonly buffer X { float x[]; };          // [m, ldx] from x_offset
layout(std430, set = 0, binding = 1) readonly buffer Norm { float norm_w[]; };  // [k] from norm_offset
layout(std430, set = 0, binding = 2) writeonly buffer Out { uint out_words[]; };

layout(push_constant) uniform Params {
  uint m, k, ldx, x_offset;
  uint norm_offset;
  float norm_eps;
  uint q_offset, dx_offset, sum_offset;  // in words
} params;

const uint kQRows = 1u;
const uint kNormLanes = 16u;

shared float norm_lanes[kNormLanes];
shared float norm_inverse;
uint row = 0u;

float qa_input(uint r, uint kk) {
  const float value = x[params.x_offset + row * params.ldx + kk];
  if (!kFusedNorm) return value;
  precise float scaled = (value * norm_inverse) * norm_w[params.norm_offset + kk];
  return scaled;
}

#include "quant_activations.glsl"

void main() {
  // Rows run along x and, past the device's per-axis workgroup limit, along y.
  row = gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x;
  if (row >= params.m) return;  // uniform over the workgroup
  const uint id = gl_LocalInvocationIndex;
  qa_begin(id);
  if (kFusedNorm) {
    // The CPU's sixteen lanes of the sum of squares (matmul_common.glsl's order).
    if (id < kNormLanes) {
      const uint x_row = params.x_offset + row * params.ldx;
      precise float acc = 0.0;
      for (uint kk = id; kk < params.k; kk += kNormLanes) acc = mb_fma(x[x_row + kk], x[x_row + kk], acc);
      norm_lanes[id] = acc;
    }
    barrier();
    if (id == 0u) {
      float lanes[kNormLanes];
      for (uint j = 0u; j < kNormLanes; ++j) lanes[j] = norm_lanes[j];
      norm_inverse = mb_inverse_rms(lanes, params.k, params.norm_eps);
    }
  }
  barrier();
  const uint blocks = params.k / kActBlock;
  for (uint step = 0u; step * 256u < params.k; ++step) {
    qa_step(id, step, params.k, 1u);
    // qa_q, qa_dx and this step's sums are next written after the next step's first barrier.
    if (step * 64u + id < params.k / 4u) out_words[params.q_offset + row * (params.k / 4u) + step * 64u + id] = qa_q[id];
    if (id < kQaBlocks && step * kQaBlocks + id < blocks)
      out_words[params.dx_offset + row * blocks + step * kQaBlocks + id] = floatBitsToUint(qa_dx[id]);
    if (id < 16u && step * 16u + id < params.k / 16u)
      out_words[params.sum_offset + row * (params.k / 16u) + step * 16u + id] = uint(qa_sum16(step, 0u, id));
  }
}

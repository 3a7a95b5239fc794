// SPDX-License-Identifier: MIT
// What the two GEMM shaders share: their bindings and push constants, the weight reads (decoded
// by packed_weights.glsl, which the selective scan's fused dt_proj shares), the row norm of the
// fused RMSNorm, and the epilogue. matmul.comp (few rows, decode) and matmul_tiled.comp (many
// rows, prefill) differ only in how a workgroup walks its outputs; every output is the same
// chain in both, so either gives the CPU's bits.
//
// The packed-weight GEMM of src/ops/matmul.h:
//   y[m, n] = sum_k x'[m, k] W[n, k] (+ bias[n]), then softplus or y += result,
// where x' = x, or with the fused norm x' = rms_norm(x) (ops/rms_norm.h, over the k axis).
// Every output is the CPU's one chain: acc = 0; acc = fma(x'[m, k], W[n, k], acc) for
// k = 0..K-1; acc + bias; softplus; y + acc.
#ifndef MB_MATMUL_COMMON_GLSL
#define MB_MATMUL_COMMON_GLSL

#include "mb_math.glsl"
#include "packed_weights.glsl"

// Whether x's rows are RMS-normalized on the way in: a specialization constant rather than a push
// constant, so that the plain product compiles without the norm's code and barriers (lavapipe,
// for one, runs a shader with barriers markedly slower).
layout(constant_id = 0) const bool kFusedNorm = false;

const uint kNormLanes = 16;  // the CPU's Vec16 lanes of the sum of squares

layout(std430, set = 0, binding = 0) readonly buffer X { float x[]; };          // [m, ldx] from x_offset
layout(std430, set = 0, binding = 1) readonly buffer W { uint w_words[]; };     // packed panels, see matmul.h
layout(std430, set = 0, binding = 2) readonly buffer Bias { float bias[]; };    // [n] from bias_offset
layout(std430, set = 0, binding = 3) buffer Y { float y[]; };                   // [m, ldy] from y_offset
layout(std430, set = 0, binding = 4) readonly buffer Norm { float norm_w[]; };  // [k] from norm_offset

layout(push_constant) uniform Params {
  uint m, n, k;
  uint ldx, ldy;
  uint x_offset, y_offset, bias_offset;
  uint w_offset;  // in elements of the weight dtype
  uint dtype;     // 0 f32, 1 bf16, 2 f16
  uint has_bias, accumulate, softplus;
  uint norm_offset;
  float norm_eps;
} params;

// W[n, kk] widened to f32, for n at `slot` of panel `panel`.
float weight(uint panel, uint kk, uint slot) {
  const uint index = packed_index(params.w_offset, panel, params.k, kk, slot);
  return decode_packed(w_words[packed_word_index(index, params.dtype)], index, params.dtype);
}

// The position of output `lane` (0..63) in its packed panel row (packed_weights.glsl).
uint panel_slot(uint lane) {
  return panel_slot(lane, params.dtype);
}

// Lane `lane` of row `row`'s sum of squares: the CPU's lane j accumulates x[j], x[j + 16], ...
// with fma (lanes past the row's end add fma(0, 0, acc), which leaves acc as it is).
float norm_lane_sum(uint row, uint lane) {
  const uint x_row = params.x_offset + row * params.ldx;
  precise float acc = 0.0;
  for (uint kk = lane; kk < params.k; kk += kNormLanes) acc = mb_fma(x[x_row + kk], x[x_row + kk], acc);
  return acc;
}

// 1 / sqrt(mean(x^2) + eps) of a row from its sixteen lane sums, as rms_norm.comp computes it.
float inverse_rms(float lanes[kNormLanes]) {
  return mb_inverse_rms(lanes, params.k, params.norm_eps);
}

// x'[row, kk]: x itself, or RMSNorm's output (x * inv) * w rounded as rms_norm.comp rounds it.
float input_value(uint row, uint kk, float inv) {
  const float value = x[params.x_offset + row * params.ldx + kk];
  if (!kFusedNorm) return value;
  precise float scaled = (value * inv) * norm_w[params.norm_offset + kk];
  return scaled;
}

// The epilogue of one output: + bias, softplus, or y + result.
void store_output(uint row, uint col, float acc) {
  precise float result = acc;
  if (params.has_bias != 0u) result = result + bias[params.bias_offset + col];
  if (params.softplus != 0u) result = mb_softplus(result);
  const uint at = params.y_offset + row * params.ldy + col;
  if (params.accumulate != 0u) result = y[at] + result;
  y[at] = result;
}

#endif

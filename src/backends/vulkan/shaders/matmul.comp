#version 450
// The packed-weight GEMM of src/ops/matmul.h:
//   y[m, n] = sum_k x[m, k] W[n, k] (+ bias[n]), then softplus or y += result.
// Every output is the CPU's one chain: acc = 0; acc = fma(x[m, k], W[n, k], acc) for k = 0..K-1;
// acc + bias; softplus; y + acc. A workgroup covers one 64-wide weight panel (one invocation per
// output column, so weight loads of neighbouring invocations are contiguous) and kRows rows
// (x[m, k] is the same address for the whole workgroup, a broadcast load).
#include "mb_math.glsl"

layout(local_size_x = 64) in;
const uint kPanelWidth = 64;
const uint kRows = 4;

layout(std430, set = 0, binding = 0) readonly buffer X { float x[]; };      // [m, ldx] from x_offset
layout(std430, set = 0, binding = 1) readonly buffer W { uint w_words[]; };  // packed panels, see matmul.h
layout(std430, set = 0, binding = 2) readonly buffer Bias { float bias[]; };  // [n] from bias_offset
layout(std430, set = 0, binding = 3) buffer Y { float y[]; };               // [m, ldy] from y_offset

layout(push_constant) uniform Params {
  uint m, n, k;
  uint ldx, ldy;
  uint x_offset, y_offset, bias_offset;
  uint w_offset;  // in elements of the weight dtype
  uint dtype;     // 0 f32, 1 bf16, 2 f16
  uint has_bias, accumulate, softplus;
} params;

// f16 bits to f32, exactly (as f16_to_f32 in src/core/dtype.cc; no dependence on the device's
// half-float conversion or its handling of f16 subnormals).
float f16_to_f32(uint h) {
  const uint sign = (h & 0x8000u) << 16;
  const uint exponent = (h >> 10) & 0x1fu;
  const uint mantissa = h & 0x3ffu;
  if (exponent == 0u) return uintBitsToFloat(floatBitsToUint(float(mantissa) * mb_pow2(-24)) | sign);
  if (exponent == 31u) return uintBitsToFloat(sign | 0x7f800000u | (mantissa << 13));
  return uintBitsToFloat(sign | ((exponent + 112u) << 23) | (mantissa << 13));
}

// W[n, k] widened to f32; `slot` is the output's position in its packed panel row.
float weight(uint panel, uint kk, uint slot) {
  const uint index = params.w_offset + (panel * params.k + kk) * kPanelWidth + slot;
  if (params.dtype == 0u) return uintBitsToFloat(w_words[index]);
  const uint word = w_words[index >> 1];
  const uint bits = (index & 1u) != 0u ? word >> 16 : word & 0xffffu;
  return params.dtype == 1u ? uintBitsToFloat(bits << 16) : f16_to_f32(bits);
}

void main() {
  const uint panel = gl_WorkGroupID.x;
  const uint lane = gl_LocalInvocationID.x;
  const uint col = panel * kPanelWidth + lane;
  const uint row0 = gl_WorkGroupID.y * kRows;
  if (col >= params.n) return;
  // bf16 panels interleave each pair of 16-output vectors element by element (pack_weights).
  const uint slot = params.dtype == 1u ? (lane / 32u) * 32u + 2u * (lane % 16u) + (lane / 16u) % 2u : lane;

  float acc[kRows];
  for (uint i = 0u; i < kRows; ++i) acc[i] = 0.0;
  for (uint kk = 0u; kk < params.k; ++kk) {
    const float wv = weight(panel, kk, slot);
    for (uint i = 0u; i < kRows; ++i) {
      const uint row = row0 + i;
      if (row < params.m) acc[i] = mb_fma(x[params.x_offset + row * params.ldx + kk], wv, acc[i]);
    }
  }
  for (uint i = 0u; i < kRows; ++i) {
    const uint row = row0 + i;
    if (row >= params.m) break;
    precise float result = acc[i];
    if (params.has_bias != 0u) result = result + bias[params.bias_offset + col];
    if (params.softplus != 0u) result = mb_softplus(result);
    const uint at = params.y_offset + row * params.ldy + col;
    if (params.accumulate != 0u) result = y[at] + result;
    y[at] = result;
  }
}

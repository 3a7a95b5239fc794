#version 450
// SPDX-License-Identifier: MIT
// Runs one function of mb_math.glsl over arrays, so tests can compare it with the CPU's, and the
// context can find out whether the device's fma() is fused (function 0 of the plain variant).
#include "mb_math.glsl"

layout(local_size_x = 64) in;

layout(std430, set = 0, binding = 0) readonly buffer InputA { float a[]; };  // [count]
layout(std430, set = 0, binding = 1) readonly buffer InputB { float b[]; };  // [count]
layout(std430, set = 0, binding = 2) readonly buffer InputC { float c[]; };  // [count]
layout(std430, set = 0, binding = 3) writeonly buffer Output { float result[]; };  // [count]

layout(push_constant) uniform Params {
  uint count;
  uint function;  // 0 fma(a, b, c), 1 a / b, 2 sqrt(a), 3 exp, 4 decay exp2, 5 softplus, 6 silu, 7 log
} params;

void main() {
  const uint i = gl_GlobalInvocationID.x;
  if (i >= params.count) return;
  float value;
  switch (params.function) {
    case 0: value = mb_fma(a[i], b[i], c[i]); break;
    case 1: value = mb_div(a[i], b[i]); break;
    case 2: value = mb_sqrt(a[i]); break;
    case 3: value = mb_exp(a[i]); break;
    case 4: value = mb_decay_exp2(a[i]); break;
    case 5: value = mb_softplus(a[i]); break;
    case 6: value = mb_silu(a[i]); break;
    default: value = mb_log(a[i]); break;
  }
  result[i] = value;
}

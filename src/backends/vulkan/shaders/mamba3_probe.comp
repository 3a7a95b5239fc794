#version 450
// SPDX-License-Identifier: MIT
// Runs one function of mb_mamba3.glsl over arrays, so tests can compare it with the CPU's (kept
// apart from math_probe.comp, which the context runs at start-up: this one needs shaderFloat64).
#include "mb_mamba3.glsl"

layout(local_size_x = 64) in;

layout(std430, set = 0, binding = 0) readonly buffer InputA { float a[]; };  // [count]
layout(std430, set = 0, binding = 1) readonly buffer InputB { float b[]; };  // [count]
layout(std430, set = 0, binding = 2) readonly buffer InputC { float c[]; };  // [count]
layout(std430, set = 0, binding = 3) writeonly buffer Output { float result[]; };  // [count]

layout(push_constant) uniform Params {
  uint count;
  uint function;  // 0 the phase step (angle a, velocity b, dt c), 1 tanh(a), 2 sin(a), 3 cos(a)
} params;

void main() {
  const uint i = gl_GlobalInvocationID.x;
  if (i >= params.count) return;
  float value, s, co;
  switch (params.function) {
    case 0: value = mb_angle_step(a[i], b[i], c[i]); break;
    case 1: value = mb_tanh(a[i]); break;
    case 2: mb_sincos(a[i], s, co); value = s; break;
    default: mb_sincos(a[i], s, co); value = co; break;
  }
  result[i] = value;
}

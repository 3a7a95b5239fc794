#version 450
// SPDX-License-Identifier: MIT
// Element-wise helpers of the Mamba-1 block over [rows, cols] views:
//   op 0 (residual add): y = a + b
//   op 1 (SiLU gate):    y = a * silu(b), as the scan's out = y * silu(z)
#include "mb_math.glsl"

layout(local_size_x = 64) in;

layout(std430, set = 0, binding = 0) readonly buffer A { float a[]; };   // [rows, lda] from a_offset
layout(std430, set = 0, binding = 1) readonly buffer B { float b[]; };   // [rows, ldb] from b_offset
layout(std430, set = 0, binding = 2) buffer Y { float y[]; };            // [rows, ldy] from y_offset; may be A or B

layout(push_constant) uniform Params {
  uint rows, cols;
  uint lda, ldb, ldy;
  uint a_offset, b_offset, y_offset;
  uint op;
} params;

void main() {
  const uint col = gl_GlobalInvocationID.x;
  const uint row = gl_GlobalInvocationID.y + gl_GlobalInvocationID.z * gl_NumWorkGroups.y;
  if (col >= params.cols || row >= params.rows) return;
  const float av = a[params.a_offset + row * params.lda + col];
  const float bv = b[params.b_offset + row * params.ldb + col];
  precise float result = params.op == 0u ? av + bv : av * mb_silu(bv);
  y[params.y_offset + row * params.ldy + col] = result;
}

#version 450
// RMSNorm of src/ops/rms_norm.h, one workgroup per row: y = (x * (1 / sqrt(mean(x^2) + eps))) * w.
// The sum of squares follows the CPU's sixteen-lane order exactly: lane j accumulates
// x[j], x[j + 16], ... with fma, and the lanes are added in reduce_sum's fixed tree
// ((l[i] + l[i+8]), then +4, +2, +1). Invocations 0..15 play the sixteen lanes; the others only
// help scale the row. No subgroup operations, so any subgroup size gives the same bits.
#include "mb_math.glsl"

layout(local_size_x = 64) in;
const uint kLanes = 16;

layout(std430, set = 0, binding = 0) readonly buffer X { float x[]; };       // [rows, ldx] from x_offset
layout(std430, set = 0, binding = 1) readonly buffer Weight { float w[]; };  // [dim] from w_offset
layout(std430, set = 0, binding = 2) buffer Y { float y[]; };                // [rows, ldy] from y_offset; may be X

layout(push_constant) uniform Params {
  uint rows, dim, ldx, ldy;
  uint x_offset, y_offset, w_offset;
  float eps;
} params;

shared float lane_sums[kLanes];
shared float inverse_rms;

void main() {
  // Rows run along x and, past the device's per-axis workgroup limit, along y.
  const uint row = gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x;
  const uint lane = gl_LocalInvocationID.x;
  const bool row_valid = row < params.rows;
  const uint x_row = params.x_offset + row * params.ldx;
  if (row_valid && lane < kLanes) {
    // Lanes past the row's end add fma(0, 0, acc) on the CPU, which leaves acc as it is.
    precise float acc = 0.0;
    for (uint k = lane; k < params.dim; k += kLanes) acc = mb_fma(x[x_row + k], x[x_row + k], acc);
    lane_sums[lane] = acc;
  }
  barrier();
  if (row_valid && lane == 0u) {
    precise float s8[8];
    for (uint i = 0u; i < 8u; ++i) s8[i] = lane_sums[i] + lane_sums[i + 8u];
    precise float s4[4];
    for (uint i = 0u; i < 4u; ++i) s4[i] = s8[i] + s8[i + 4u];
    precise float total = (s4[0] + s4[2]) + (s4[1] + s4[3]);
    const float mean_square = mb_div(total, float(params.dim));
    precise float shifted = mean_square + params.eps;
    inverse_rms = mb_div(1.0, mb_sqrt(shifted));
  }
  barrier();
  if (!row_valid) return;
  const float inv = inverse_rms;
  const uint y_row = params.y_offset + row * params.ldy;
  for (uint k = lane; k < params.dim; k += gl_WorkGroupSize.x) {
    precise float scaled = (x[x_row + k] * inv) * w[params.w_offset + k];
    y[y_row + k] = scaled;
  }
}

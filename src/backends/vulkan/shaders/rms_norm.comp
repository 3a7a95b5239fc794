#version 450
// SPDX-License-Identifier: MIT
// RMSNorm of src/ops/rms_norm.h over up to four segments of each row, each normalized over its
// own width (FalconMamba's dt_low, B and C in one dispatch); a plain RMSNorm is one segment.
// One workgroup per (row, segment): y = (x * (1 / sqrt(mean(x^2) + eps))) * w.
// The sum of squares follows the CPU's sixteen-lane order exactly: lane j accumulates
// x[j], x[j + 16], ... with fma, and the lanes are added in reduce_sum's fixed tree
// ((l[i] + l[i+8]), then +4, +2, +1). Invocations 0..15 play the sixteen lanes; the others only
// help scale the segment. No subgroup operations, so any subgroup size gives the same bits.
#include "mb_math.glsl"

layout(local_size_x = 64) in;
const uint kLanes = 16;

const uint kMaxSegments = 4;

layout(std430, set = 0, binding = 0) readonly buffer X { float x[]; };       // [rows, ldx] from x_offset
layout(std430, set = 0, binding = 1) readonly buffer Weight { float w[]; };  // each segment's [dim] from its w_offset
layout(std430, set = 0, binding = 2) buffer Y { float y[]; };                // [rows, ldy] from y_offset; may be X

layout(push_constant) uniform Params {
  uint rows, ldx, ldy;
  uint x_offset, y_offset;
  float eps;
  // Segment s (workgroup z): columns column[s] .. column[s] + dim[s] of x's and y's rows,
  // weights from w_offset[s].
  uint column[kMaxSegments], dim[kMaxSegments], w_offset[kMaxSegments];
} params;

shared float lane_sums[kLanes];
shared float inverse_rms;

void main() {
  // Rows run along x and, past the device's per-axis workgroup limit, along y.
  const uint row = gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x;
  const uint segment = gl_WorkGroupID.z;
  const uint dim = params.dim[segment];
  const uint lane = gl_LocalInvocationID.x;
  const bool row_valid = row < params.rows;
  const uint x_row = params.x_offset + row * params.ldx + params.column[segment];
  if (row_valid && lane < kLanes) {
    // Lanes past the row's end add fma(0, 0, acc) on the CPU, which leaves acc as it is.
    precise float acc = 0.0;
    for (uint k = lane; k < dim; k += kLanes) acc = mb_fma(x[x_row + k], x[x_row + k], acc);
    lane_sums[lane] = acc;
  }
  barrier();
  if (row_valid && lane == 0u) {
    float lanes[kLanes];
    for (uint i = 0u; i < kLanes; ++i) lanes[i] = lane_sums[i];
    inverse_rms = mb_inverse_rms(lanes, dim, params.eps);
  }
  barrier();
  if (!row_valid) return;
  const float inv = inverse_rms;
  const uint y_row = params.y_offset + row * params.ldy + params.column[segment];
  const uint w_at = params.w_offset[segment];
  for (uint k = lane; k < dim; k += gl_WorkGroupSize.x) {
    precise float scaled = (x[x_row + k] * inv) * w[w_at + k];
    y[y_row + k] = scaled;
  }
}

// SPDX-License-Identifier: MIT
// Mamba-2's grouped gated RMSNorm (src/ops/gated_rms_norm.h, norm_before_gate false) with the CPU
// kernel's bits: per row, v = y * silu(z); then each group of group_size channels is scaled by
// 1 / sqrt(mean(v^2) + eps) and the weight, (v * inv) * w. Without a weight only the gate runs.
// One workgroup per (row, group). The sum of squares follows the CPU's sixteen-lane order: lane
// j accumulates the group's values j, j + 16, ... with fma, and the lanes are added in reduce_sum's
// fixed tree (mb_lanes.glsl's mb_tree16: subgroup shuffles where the subgroup holds the partner,
// shared memory otherwise). Invocations 0..15 (in mb_linear) play the sixteen lanes; all of them
// share the element-wise work. out may be y (in place): every element is read and written by the
// same invocation, and the lanes read the gated values back after a barrier.
//
// Included by gated_rms_norm.comp and gated_rms_norm_subgroup.comp (MB_SUBGROUP).
#include "mb_subgroup.glsl"

layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint kInvocations = 64;  // a multiple of 64
const uint kLanes = 16;

#include "mb_math.glsl"
#include "mb_lanes.glsl"

layout(std430, set = 0, binding = 0) readonly buffer Y { float y[]; };        // [rows, ldy] from y_offset
layout(std430, set = 0, binding = 1) readonly buffer Z { float z[]; };        // [rows, ldz] from z_offset
layout(std430, set = 0, binding = 2) readonly buffer Weight { float w[]; };   // [dim] from w_offset
layout(std430, set = 0, binding = 3) coherent buffer Out { float out_values[]; };  // [rows, ldout]; may be Y

layout(push_constant) uniform Params {
  uint rows, dim, group_size;
  uint ldy, ldz, ldout;
  uint y_offset, z_offset, w_offset, out_offset;
  uint has_weight;
  float eps;
} params;

shared float inverse_rms;

void main() {
  // Rows run along x and, past the device's per-axis workgroup limit, along y; groups along z.
  const uint row = gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x;
  const bool row_valid = row < params.rows;  // uniform over the workgroup
  if (!row_valid) return;
  mb_lanes_begin();
  const uint g0 = gl_WorkGroupID.z * params.group_size;
  const uint y_at = params.y_offset + row * params.ldy + g0;
  const uint z_at = params.z_offset + row * params.ldz + g0;
  const uint out_at = params.out_offset + row * params.ldout + g0;
  for (uint k = mb_linear; k < params.group_size; k += kInvocations) {
    precise float gated = y[y_at + k] * mb_silu(z[z_at + k]);
    out_values[out_at + k] = gated;
  }
  if (params.has_weight == 0u) return;
  memoryBarrierBuffer();
  barrier();
  // Lanes past the group's end add fma(0, 0, acc) on the CPU, which leaves acc as it is.
  precise float acc = 0.0;
  const uint lane = mb_linear % kLanes;
  if (mb_linear < kLanes)
    for (uint k = lane; k < params.group_size; k += kLanes) acc = mb_fma(out_values[out_at + k], out_values[out_at + k], acc);
  const float total = mb_tree16(acc);
  if (mb_linear == 0u) {
    const float mean_square = mb_div(total, float(params.group_size));
    precise float shifted = mean_square + params.eps;
    inverse_rms = mb_div(1.0, mb_sqrt(shifted));
  }
  barrier();
  const float inv = inverse_rms;
  const uint w_at = params.w_offset + g0;
  for (uint k = mb_linear; k < params.group_size; k += kInvocations) {
    precise float scaled = (out_values[out_at + k] * inv) * w[w_at + k];
    out_values[out_at + k] = scaled;
  }
}

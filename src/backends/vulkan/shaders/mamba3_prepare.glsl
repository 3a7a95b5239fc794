// SPDX-License-Identifier: MIT
// The per-row work of the Mamba-3 mixer that every head shares (mamba3_kernels.inc's
// prepare_row), over the rows of a round's parts, in place in the in_proj outputs:
//   B and C of every group: x = (x * (1 / sqrt(mean(x^2) + eps))) * w   (BCNorm, one weight for
//       all groups; the sum of squares in the CPU's sixteen-lane order, mb_lanes.glsl's tree)
//   the angle velocities: omega = tanh(raw) * pi
// Workgroups are (row, part, segment), a workgroup taking rows x, x + (workgroups along x), ... of
// its part; segments 0..G-1 are B's groups, G..2G-1 C's, 2G the angles. Invocations 0..15 (in
// mb_linear) play the sixteen lanes.
//
// Included by mamba3_prepare.comp and mamba3_prepare_subgroup.comp (MB_SUBGROUP).
#include "mb_subgroup.glsl"

layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint kInvocations = 64;  // a multiple of 64
const uint kLanes = 16;

#include "mb_mamba3.glsl"
#include "mb_lanes.glsl"

layout(std430, set = 0, binding = 0) coherent buffer Proj { float proj[]; };        // [rows, ldp]
layout(std430, set = 0, binding = 1) readonly buffer BNorm { float b_norm[]; };     // [N]
layout(std430, set = 0, binding = 2) readonly buffer CNorm { float c_norm[]; };     // [N]
layout(std430, set = 0, binding = 3) readonly buffer Parts { uint part_rows[]; };   // [parts][2] from parts_at

layout(push_constant) uniform Params {
  uint d_state, n_groups, n_angles;
  uint ldp, proj_offset, b_at, angle_at;  // B's and the angles' first columns
  uint b_norm_offset, c_norm_offset;
  float eps;
  uint parts_at;
} params;

shared float inverse_rms;

void prepare(uint row, uint segment) {
  const uint G = params.n_groups, N = params.d_state;
  if (segment == 2u * G) {
    for (uint a = mb_linear; a < params.n_angles; a += kInvocations) {
      precise float omega = mb_tanh(proj[row + params.angle_at + a]) * 3.141592741e+00;
      proj[row + params.angle_at + a] = omega;
    }
    return;
  }
  const uint at = row + params.b_at + segment * N;  // C's groups follow B's
  const uint w_at = segment < G ? params.b_norm_offset : params.c_norm_offset;
  // Lanes past the segment's end add fma(0, 0, acc) on the CPU, which leaves acc as it is.
  precise float acc = 0.0;
  if (mb_linear < kLanes)
    for (uint n = mb_linear; n < N; n += kLanes) acc = mb_fma(proj[at + n], proj[at + n], acc);
  const float total = mb_tree16(acc);
  if (mb_linear == 0u) {
    const float mean_square = mb_div(total, float(N));
    precise float shifted = mean_square + params.eps;
    inverse_rms = mb_div(1.0, mb_sqrt(shifted));
  }
  barrier();
  const float inv = inverse_rms;
  for (uint n = mb_linear; n < N; n += kInvocations) {
    const float w = segment < G ? b_norm[w_at + n] : c_norm[w_at + n];
    precise float normed = (proj[at + n] * inv) * w;
    proj[at + n] = normed;
  }
  barrier();  // inverse_rms is rewritten for the next row
}

void main() {
  const uint part = gl_WorkGroupID.y;
  const uint positions = part_rows[params.parts_at + 2u * part + 1u];
  const uint first = part_rows[params.parts_at + 2u * part];
  mb_lanes_begin();
  for (uint t = gl_WorkGroupID.x; t < positions; t += gl_NumWorkGroups.x)  // uniform over the workgroup
    prepare(params.proj_offset + (first + t) * params.ldp, gl_WorkGroupID.z);
}

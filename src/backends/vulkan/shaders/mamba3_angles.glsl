// SPDX-License-Identifier: MIT
// The RoPE phases of the Mamba-3 mixer's chunked form (the phases of mamba3_kernels.inc's
// head_kq): one workgroup per (head, part), one invocation per angle walking the part's rows in
// order, theta = mb_angle_step(theta, omega, dt) from the state's phases. Each row's phases go to
// the scratch, [round row][H][max(na, 1)] from angles_at, for ssd_prep_mamba3; the last row's are
// the new state. dt = softplus(dd_dt + dt_bias), as the token scalars compute it.
//
// Included by mamba3_angles.comp (one part per dispatch) and mamba3_angles_parts.comp
// (MB_MAX_PARTS states, indexed by the workgroup's part).
layout(local_size_x = 64) in;

#include "mb_mamba3.glsl"

layout(std430, set = 0, binding = 0) writeonly buffer Scratch { float scratch[]; };
layout(std430, set = 0, binding = 1) readonly buffer Proj { float proj[]; };        // [rows, ldp], prepared
layout(std430, set = 0, binding = 2) readonly buffer DtBias { float dt_bias[]; };   // [H]
layout(std430, set = 0, binding = 3) readonly buffer Parts { uint part_rows[]; };   // [parts][2] from parts_at
layout(std430, set = 0, binding = 4) buffer State { float values[]; } states[MB_MAX_PARTS];

layout(push_constant) uniform Params {
  uint n_heads, n_angles, angle_slots;
  uint ldp, proj_offset, dt_at, omega_at;  // the columns of dd_dt and of the velocities
  uint dt_bias_offset, angle_offset;       // each state's [H, angle_slots] phases
  uint angles_at, parts_at, part_base;
} params;

#if MB_MAX_PARTS > 1
#define STATE states[gl_WorkGroupID.y].values  // uniform over the workgroup
#else
#define STATE states[0].values
#endif

void main() {
  const uint h = gl_WorkGroupID.x;
  const uint part = params.part_base + gl_WorkGroupID.y;
  const uint first = part_rows[params.parts_at + 2u * part];
  const uint positions = part_rows[params.parts_at + 2u * part + 1u];
  const float bias = dt_bias[params.dt_bias_offset + h];
  const uint state_at = params.angle_offset + h * params.angle_slots;
  for (uint a = gl_LocalInvocationIndex; a < params.n_angles; a += gl_WorkGroupSize.x) {
    float angle = STATE[state_at + a];
    for (uint t = 0u; t < positions; ++t) {
      const uint row = params.proj_offset + (first + t) * params.ldp;
      precise float raw = proj[row + params.dt_at + h] + bias;
      angle = mb_angle_step(angle, proj[row + params.omega_at + a], mb_softplus(raw));
      scratch[params.angles_at + ((first + t) * params.n_heads + h) * params.angle_slots + a] = angle;
    }
    if (positions > 0u) STATE[state_at + a] = angle;
  }
}

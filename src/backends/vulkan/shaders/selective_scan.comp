#version 450
// The Mamba-1 selective scan of src/ops/selective_scan.h for one sequence, state carried in and
// out. Per channel, per position t, n ascending:
//   h[n] = fma(2^(dt * a_base2[n]), h[n], (dt * u) * B[n]);  y = fma(h[n], C[n], y)
//   y = fma(D, u, y);  out = y * silu(z)
// A workgroup owns kChannels channels and their state [N][kChannels] in shared memory. The state
// updates of one position are independent across n, so they run in parallel over the
// workgroup's kStateLanes rows of invocations; the sum over n must stay the CPU's sequential fma
// chain, so after a barrier one invocation per channel runs it. The workgroup shape and the
// shared size are specialization constants the host fits to the device (any subgroup size,
// any shared-memory limit).
#include "mb_math.glsl"

layout(local_size_x_id = 0, local_size_y_id = 1) in;
layout(constant_id = 0) const uint kChannels = 16;    // channels per workgroup (local x)
layout(constant_id = 1) const uint kStateLanes = 4;   // invocations sharing one channel's states (local y)
layout(constant_id = 2) const uint kSharedFloats = 4096;  // >= d_state * kChannels

layout(std430, set = 0, binding = 0) readonly buffer U { float u[]; };        // [positions, ldu]
layout(std430, set = 0, binding = 1) readonly buffer Dt { float dt[]; };      // [positions, lddt], softplus applied
layout(std430, set = 0, binding = 2) readonly buffer BC { float bc[]; };      // B at b_offset, C at c_offset: [positions, ldbc]
layout(std430, set = 0, binding = 3) readonly buffer Z { float z[]; };        // [positions, ldz] gate inputs
layout(std430, set = 0, binding = 4) readonly buffer Rate { float a_base2[]; };  // [N, channels] = A log2(e)
layout(std430, set = 0, binding = 5) readonly buffer Skip { float d_skip[]; };   // [channels]
layout(std430, set = 0, binding = 6) buffer State { float state[]; };           // [N, channels]
layout(std430, set = 0, binding = 7) writeonly buffer Y { float y[]; };         // [positions, ldy]

layout(push_constant) uniform Params {
  uint positions, channels, d_state;
  uint ldu, lddt, ldbc, ldz, ldy;
  uint u_offset, dt_offset, b_offset, c_offset, z_offset, y_offset;
  uint a_offset, d_offset, state_offset;
  uint has_gate;
} params;

shared float h[kSharedFloats];  // [N][kChannels]

void main() {
  const uint local_c = gl_LocalInvocationID.x;
  const uint lane = gl_LocalInvocationID.y;
  const uint c = gl_WorkGroupID.x * kChannels + local_c;
  const bool channel_valid = c < params.channels;
  const uint N = params.d_state;
  if (channel_valid)
    for (uint n = lane; n < N; n += kStateLanes) h[n * kChannels + local_c] = state[params.state_offset + n * params.channels + c];
  barrier();

  for (uint t = 0u; t < params.positions; ++t) {
    float u_t = 0.0, dt_t = 0.0;
    if (channel_valid) {
      u_t = u[params.u_offset + t * params.ldu + c];
      dt_t = dt[params.dt_offset + t * params.lddt + c];
      precise float dt_u = dt_t * u_t;
      for (uint n = lane; n < N; n += kStateLanes) {
        precise float exponent = dt_t * a_base2[params.a_offset + n * params.channels + c];
        const float decay = mb_decay_exp2(exponent);
        precise float drive = dt_u * bc[params.b_offset + t * params.ldbc + n];
        h[n * kChannels + local_c] = mb_fma(decay, h[n * kChannels + local_c], drive);
      }
    }
    barrier();
    if (channel_valid && lane == 0u) {
      precise float out_t = 0.0;
      for (uint n = 0u; n < N; ++n) out_t = mb_fma(h[n * kChannels + local_c], bc[params.c_offset + t * params.ldbc + n], out_t);
      out_t = mb_fma(d_skip[params.d_offset + c], u_t, out_t);
      if (params.has_gate != 0u) out_t = out_t * mb_silu(z[params.z_offset + t * params.ldz + c]);
      y[params.y_offset + t * params.ldy + c] = out_t;
    }
    barrier();
  }
  if (channel_valid)
    for (uint n = lane; n < N; n += kStateLanes) state[params.state_offset + n * params.channels + c] = h[n * kChannels + local_c];
}

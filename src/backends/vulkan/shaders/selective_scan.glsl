// SPDX-License-Identifier: MIT
// The Mamba-1 selective scan of src/ops/selective_scan.h over the parts of a round: part p is a
// run of rows (parts table: first row, row count) of one sequence, with its own state,
// states[p]. Per channel, per position t of the part, n ascending:
//   h[n] = fma(2^(dt * a_base2[n]), h[n], (dt * u) * B[n]);  y = fma(h[n], C[n], y)
//   y = fma(D, u, y);  out = y * silu(z)
// Workgroups are (channel block, part). A workgroup owns kChannels channels of one part and
// their state [N][kChannels] in shared memory. The state updates of one position are
// independent across n, so they run in parallel over the workgroup's kStateLanes rows of
// invocations; the sum over n must stay the CPU's sequential fma chain, so after a barrier one
// invocation per channel runs it. The workgroup shape and the shared size are specialization
// constants the host fits to the device (any subgroup size, any shared-memory limit).
//
// With kFusedDt the scan also runs dt_proj: dt is not read from a buffer but computed per
// channel c and row as the GEMM shaders compute an output of dt_proj (matmul_common.glsl), the
// CPU's chain acc = 0; acc = fma(dt_low[row, k], W_dt[c, k], acc) for k = 0..R-1, then
// softplus(acc + dt_bias[c]), with W_dt in packed panels (packed_weights.glsl). dt_low is the
// first R columns of x_proj's output, the buffer B and C come from. Each dt is computed once,
// before the scan's loop: the channel's invocations take the part's positions in turn and park
// dt in y (the row and channel whose output later overwrites it), and the loop reads it back.
// Computed inside the loop instead (the next position's dt by invocation 0, or a block of
// positions at a time), the same arithmetic made lavapipe's prefill scan up to twice as slow,
// far more than the dt_proj dispatch it replaced; hoisted out of the loop it costs about that.
//
// Included by selective_scan_parts.comp (MB_MAX_PARTS states, indexed by the workgroup's part:
// needs shaderStorageBufferArrayDynamicIndexing) and selective_scan.comp (one part per
// dispatch, the fallback without that feature). The arithmetic is the same in both.
#include "mb_math.glsl"
#include "packed_weights.glsl"

layout(local_size_x_id = 0, local_size_y_id = 1) in;
layout(constant_id = 0) const uint kChannels = 16;    // channels per workgroup (local x)
layout(constant_id = 1) const uint kStateLanes = 4;   // invocations sharing one channel's states (local y)
layout(constant_id = 2) const uint kSharedFloats = 4096;  // >= d_state * kChannels
layout(constant_id = 3) const bool kFusedDt = false;      // dt from dt_low, W_dt and dt_bias

layout(std430, set = 0, binding = 0) readonly buffer U { float u[]; };        // [rows, ldu]
layout(std430, set = 0, binding = 1) readonly buffer Dt { float dt[]; };      // [rows, lddt], softplus applied; unread with kFusedDt
layout(std430, set = 0, binding = 2) readonly buffer BC { float bc[]; };      // B, C (and dt_low) from their offsets: [rows, ldbc]
layout(std430, set = 0, binding = 3) readonly buffer Z { float z[]; };        // [rows, ldz] gate inputs
layout(std430, set = 0, binding = 4) readonly buffer Rate { float a_base2[]; };  // [N, channels] = A log2(e)
layout(std430, set = 0, binding = 5) readonly buffer Skip { float d_skip[]; };   // [channels]
layout(std430, set = 0, binding = 6) coherent buffer Y { float y[]; };  // [rows, ldy]; with kFusedDt dt first
layout(std430, set = 0, binding = 7) readonly buffer Parts { uint part_rows[]; };  // [parts][2] from parts_at
layout(std430, set = 0, binding = 8) readonly buffer DtWeight { uint dt_words[]; };  // W_dt [channels, R] packed, from dt_w_offset
layout(std430, set = 0, binding = 9) readonly buffer DtBias { float dt_bias[]; };     // [channels] from dt_bias_offset
layout(std430, set = 0, binding = 10) buffer State { float values[]; } states[MB_MAX_PARTS];  // [N, channels] from state_offset

layout(push_constant) uniform Params {
  uint channels, d_state;
  uint ldu, lddt, ldbc, ldz, ldy;
  uint u_offset, dt_offset, b_offset, c_offset, z_offset, y_offset;
  uint a_offset, d_offset, state_offset;
  uint has_gate;
  uint parts_at;
  uint dt_rank, dt_dtype, dt_low_offset, dt_w_offset, dt_bias_offset;  // kFusedDt only
} params;

#if MB_MAX_PARTS > 1
#define STATE states[part].values  // part is uniform over the workgroup
#else
#define STATE states[0].values
#endif

shared float h[kSharedFloats];  // [N][kChannels]
// dt_proj's output for channel c at `row`, softplus applied: the bits of matmul_common.glsl's
// chain and store_output for the same weights.
float fused_dt(uint row, uint c) {
  const uint panel = c / kPanelWidth;
  const uint slot = panel_slot(c % kPanelWidth, params.dt_dtype);
  const uint x_row = params.dt_low_offset + row * params.ldbc;
  precise float acc = 0.0;
  for (uint k = 0u; k < params.dt_rank; ++k) {
    const uint index = packed_index(params.dt_w_offset, panel, params.dt_rank, k, slot);
    const float w = decode_packed(dt_words[packed_word_index(index, params.dt_dtype)], index, params.dt_dtype);
    acc = mb_fma(bc[x_row + k], w, acc);
  }
  precise float result = acc + dt_bias[params.dt_bias_offset + c];
  result = mb_softplus(result);
  return result;
}

void main() {
  const uint local_c = gl_LocalInvocationID.x;
  const uint lane = gl_LocalInvocationID.y;
  const uint c = gl_WorkGroupID.x * kChannels + local_c;
  const uint part = gl_WorkGroupID.y;
  const bool channel_valid = c < params.channels;
  const uint N = params.d_state;
  const uint first = part_rows[params.parts_at + 2u * part];
  const uint positions = part_rows[params.parts_at + 2u * part + 1u];
  if (channel_valid)
    for (uint n = lane; n < N; n += kStateLanes) h[n * kChannels + local_c] = STATE[params.state_offset + n * params.channels + c];
  if (kFusedDt) {
    if (channel_valid)
      for (uint t = lane; t < positions; t += kStateLanes) y[params.y_offset + (first + t) * params.ldy + c] = fused_dt(first + t, c);
    memoryBarrierBuffer();  // the other invocations of the channel read these after the barrier
  }
  barrier();

  for (uint t = 0u; t < positions; ++t) {
    const uint row = first + t;
    float u_t = 0.0, dt_t = 0.0;
    if (channel_valid) {
      u_t = u[params.u_offset + row * params.ldu + c];
      // With kFusedDt, every invocation reads the parked dt before the barrier below, and
      // invocation 0 overwrites it with the output only after it.
      dt_t = kFusedDt ? y[params.y_offset + row * params.ldy + c] : dt[params.dt_offset + row * params.lddt + c];
      precise float dt_u = dt_t * u_t;
      for (uint n = lane; n < N; n += kStateLanes) {
        precise float exponent = dt_t * a_base2[params.a_offset + n * params.channels + c];
        const float decay = mb_decay_exp2(exponent);
        precise float drive = dt_u * bc[params.b_offset + row * params.ldbc + n];
        h[n * kChannels + local_c] = mb_fma(decay, h[n * kChannels + local_c], drive);
      }
    }
    barrier();
    if (channel_valid && lane == 0u) {
      precise float out_t = 0.0;
      for (uint n = 0u; n < N; ++n) out_t = mb_fma(h[n * kChannels + local_c], bc[params.c_offset + row * params.ldbc + n], out_t);
      out_t = mb_fma(d_skip[params.d_offset + c], u_t, out_t);
      if (params.has_gate != 0u) out_t = out_t * mb_silu(z[params.z_offset + row * params.ldz + c]);
      y[params.y_offset + row * params.ldy + c] = out_t;
    }
    barrier();
  }
  if (channel_valid)
    for (uint n = lane; n < N; n += kStateLanes) STATE[params.state_offset + n * params.channels + c] = h[n * kChannels + local_c];
}

// SPDX-License-Identifier: MIT
// The sequential Mamba-2 scan of src/ops/mamba2_scan.h over the parts of a round: part p is a run
// of rows (parts table: first row, row count) of one sequence with its own state, states[p].
// Per head h (of P channels, B and C of group g = h / (H / G)) and position t:
//   dt = min(dt_max, max(dt_min, softplus(dt_raw + dt_bias[h])))   (written back over dt_raw)
//   decay = decay_exp2(dt * a_base2[h])
//   S[n][p] = fma(decay, S[n][p], (dt * x[p]) * B[n])   for n ascending
//   y[p] = fma(D, x[p], acc),  acc = 0; acc = fma(S[n][p], C[n], acc) for n ascending
// the bits of the CPU kernel (mamba2_kernels.inc's scan_sequential).
//
// One workgroup per (head, part). Channel p's state S[.][p] lives in registers across the whole
// walk over time, split over kLanes invocations that hold kRegs consecutive n each. The state
// updates are independent across n; the sum over n must stay the CPU's sequential fma chain, so
// it is pipelined: at tick k the invocation holding lane j of a channel works on position k - j,
// continuing the chain that lane j - 1 handed it at the end of tick k - 1 (mb_lanes.glsl: a
// subgroup shuffle, or shared memory). Each tick then costs kRegs chained fmas instead of N, and
// position t's output leaves the last lane at tick t + kLanes - 1.
//
// Inputs stream through shared memory: every kBlock ticks the workgroup stages the next kBlock
// positions' x of the head, B and C of its group, dt (prepared here and written back) and the
// decay into one half of a two-block ring. The lanes of a tick span kLanes - 1 positions behind
// the newest, so kBlock >= kLanes - 1 keeps every position they read inside the ring.
//
// Included by mamba2_scan[_subgroup].comp (one part per dispatch: devices without
// shaderStorageBufferArrayDynamicIndexing) and mamba2_scan_parts[_subgroup].comp (MB_MAX_PARTS
// states, indexed by the workgroup's part). The arithmetic is the same in all four.
#include "mb_subgroup.glsl"

layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint kInvocations = 64;  // a multiple of 64, >= kHeaddim * kLanes
layout(constant_id = 1) const uint kLanes = 1;         // invocations per channel (a power of two)
layout(constant_id = 2) const uint kRegs = 16;         // states per invocation: ceil(N / kLanes)
layout(constant_id = 3) const uint kBlock = 8;         // positions staged at a time, >= kLanes - 1
layout(constant_id = 4) const uint kHeaddim = 64;      // P
layout(constant_id = 5) const uint kStates = 128;      // N

#include "mb_math.glsl"
#include "mb_lanes.glsl"

layout(std430, set = 0, binding = 0) readonly buffer Xbc { float xbc[]; };     // [rows, ldxbc]: x | B | C
layout(std430, set = 0, binding = 1) buffer Dt { float dt[]; };                // [rows, lddt]: raw, then prepared
layout(std430, set = 0, binding = 2) writeonly buffer Y { float y[]; };        // [rows, ldy]
layout(std430, set = 0, binding = 3) readonly buffer DtBias { float dt_bias[]; };  // [H]
layout(std430, set = 0, binding = 4) readonly buffer Rate { float a_base2[]; };    // [H] = A log2(e)
layout(std430, set = 0, binding = 5) readonly buffer Skip { float d_skip[]; };     // [H] or [H * P]
layout(std430, set = 0, binding = 6) readonly buffer Parts { uint part_rows[]; };  // [parts][2] from parts_at
layout(std430, set = 0, binding = 7) buffer State { float values[]; } states[MB_MAX_PARTS];  // [H, N, P] from state_offset

layout(push_constant) uniform Params {
  uint n_heads, n_groups;
  uint ldxbc, lddt, ldy;
  uint xbc_offset, dt_offset, y_offset;
  uint dt_bias_offset, a_offset, d_offset, d_per_channel;
  float dt_min, dt_max;
  uint state_offset, parts_at;
} params;

#if MB_MAX_PARTS > 1
#define STATE states[part].values  // part is uniform over the workgroup
#else
#define STATE states[0].values
#endif

shared float x_ring[2 * kBlock * kHeaddim];  // [2 blocks][kBlock][P]
shared float b_ring[2 * kBlock * kStates];   // [2 blocks][kBlock][N]
shared float c_ring[2 * kBlock * kStates];
shared float dt_ring[2 * kBlock];
shared float decay_ring[2 * kBlock];

// Stages block `block` (positions block * kBlock onwards) into ring half block & 1.
void stage_block(uint block, uint first, uint positions, uint h, uint g) {
  const uint begin = block * kBlock;
  const uint count = min(kBlock, positions - begin);
  const uint ring = (block & 1u) * kBlock;
  const uint d_inner = params.n_heads * kHeaddim;
  const uint x_at = params.xbc_offset + h * kHeaddim;
  const uint b_at = params.xbc_offset + d_inner + g * kStates;
  const uint c_at = b_at + params.n_groups * kStates;
  for (uint e = gl_LocalInvocationIndex; e < count * kHeaddim; e += kInvocations) {
    const uint i = e / kHeaddim, p = e % kHeaddim;
    x_ring[(ring + i) * kHeaddim + p] = xbc[x_at + (first + begin + i) * params.ldxbc + p];
  }
  for (uint e = gl_LocalInvocationIndex; e < count * kStates; e += kInvocations) {
    const uint i = e / kStates, n = e % kStates;
    const uint row = (first + begin + i) * params.ldxbc;
    b_ring[(ring + i) * kStates + n] = xbc[b_at + row + n];
    c_ring[(ring + i) * kStates + n] = xbc[c_at + row + n];
  }
  for (uint i = gl_LocalInvocationIndex; i < count; i += kInvocations) {
    const uint at = params.dt_offset + (first + begin + i) * params.lddt + h;
    precise float raw = dt[at] + dt_bias[params.dt_bias_offset + h];
    const float limited = mb_min(params.dt_max, mb_max(params.dt_min, mb_softplus(raw)));
    dt[at] = limited;
    dt_ring[ring + i] = limited;
    precise float exponent = limited * a_base2[params.a_offset + h];
    decay_ring[ring + i] = mb_decay_exp2(exponent);
  }
}

void main() {
  const uint h = gl_WorkGroupID.x;
  const uint part = gl_WorkGroupID.y;
  mb_lanes_begin();
  const uint channel = mb_linear / kLanes;
  const uint lane = mb_linear % kLanes;
  const bool valid = channel < kHeaddim;
  const uint first = part_rows[params.parts_at + 2u * part];
  const uint positions = part_rows[params.parts_at + 2u * part + 1u];
  const uint g = h / (params.n_heads / params.n_groups);
  const uint state_at = params.state_offset + h * kStates * kHeaddim + (valid ? channel : 0u);

  precise float S[kRegs];
  for (uint r = 0u; r < kRegs; ++r) {
    const uint n = lane * kRegs + r;
    S[r] = valid && n < kStates ? STATE[state_at + n * kHeaddim] : 0.0;
  }
  const uint d_at = params.d_offset + (params.d_per_channel != 0u ? h * kHeaddim + (valid ? channel : 0u) : h);
  const float d = d_skip[d_at];

  precise float carried = 0.0;  // the chain handed over by the previous lane
  const uint ticks = positions > 0u ? positions + kLanes - 1u : 0u;
  for (uint tick = 0u; tick < ticks; ++tick) {
    if (tick % kBlock == 0u && tick < positions) {
      barrier();  // the ring half about to be refilled has been read
      stage_block(tick / kBlock, first, positions, h, g);
      barrier();
    }
    precise float acc = lane == 0u ? 0.0 : carried;
    const int t = int(tick) - int(lane);
    if (valid && t >= 0 && t < int(positions)) {
      const uint at = (uint(t) / kBlock & 1u) * kBlock + uint(t) % kBlock;
      const float x = x_ring[at * kHeaddim + channel];
      const float decay = decay_ring[at];
      precise float dtx = dt_ring[at] * x;
      for (uint r = 0u; r < kRegs; ++r) {
        const uint n = lane * kRegs + r;
        if (n < kStates) {
          precise float drive = dtx * b_ring[at * kStates + n];
          S[r] = mb_fma(decay, S[r], drive);
          acc = mb_fma(S[r], c_ring[at * kStates + n], acc);
        }
      }
      if (lane == kLanes - 1u) y[params.y_offset + (first + uint(t)) * params.ldy + h * kHeaddim + channel] = mb_fma(d, x, acc);
    }
    if (kLanes > 1u) carried = mb_from_previous(acc, kLanes);
  }

  if (valid)
    for (uint r = 0u; r < kRegs; ++r) {
      const uint n = lane * kRegs + r;
      if (n < kStates) STATE[state_at + n * kHeaddim] = S[r];
    }
}

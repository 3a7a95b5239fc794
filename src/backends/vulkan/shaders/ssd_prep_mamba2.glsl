// SPDX-License-Identifier: MIT
// The inputs of one chunk of Mamba-2's SSD form for one head (mamba2_kernels.inc's
// scan_chunked), one workgroup per (chunk, head) batch, into the batch's scratch (ssd_layout.glsl):
//   dt_i = min(dt_max, max(dt_min, softplus(dt_raw + dt_bias)))   (written back over dt_raw)
//   cum_i = cum_{i-1} + dt_i A  (from 0 at the chunk's start); Rows: cum_i, exp(cum_i), diag_i
//   diag_i = D + dt_i (C_i . B_i)  (dt_i (C_i . B_i) alone with D per channel); the dot product
//            in the sixteen-lane order of the CPU's dot (mb_lanes.glsl's tree)
//   Q = C, Kt[n][i] = dt_i B_i[n], Ktw[n][i] = Kt[n][i] exp(cum_last - cum_i), V = x,
//   Chunk: exp(cum_last)
// Included by ssd_prep_mamba2.comp and ssd_prep_mamba2_subgroup.comp (MB_SUBGROUP).
#include "mb_subgroup.glsl"

layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint kInvocations = 128;  // a multiple of 64
const uint kLanes = 16;

#include "mb_math.glsl"
#include "mb_lanes.glsl"
#include "ssd_layout.glsl"

layout(std430, set = 0, binding = 0) coherent buffer Scratch { float scratch[]; };
layout(std430, set = 0, binding = 1) readonly buffer Tables { uint tables[]; };
layout(std430, set = 0, binding = 2) readonly buffer Xbc { float xbc[]; };     // [rows, ldxbc]: x | B | C
layout(std430, set = 0, binding = 3) buffer Dt { float dt[]; };                // [rows, lddt]
layout(std430, set = 0, binding = 4) readonly buffer DtBias { float dt_bias[]; };  // [H]
layout(std430, set = 0, binding = 5) readonly buffer Rate { float a_rate[]; };     // [H] = A
layout(std430, set = 0, binding = 6) readonly buffer Skip { float d_skip[]; };     // [H] (per head)

layout(push_constant) uniform Params {
  uint chunk, states, headdim;  // L, N, P
  uint head_begin, head_count, chunks_at;
  uint n_heads, n_groups;
  uint ldxbc, lddt, xbc_offset, dt_offset;
  uint dt_bias_offset, a_offset, d_offset, d_per_channel;
  float dt_min, dt_max;
} params;

void main() {
  const uint L = params.chunk, N = params.states, P = params.headdim;
  const SsdLayout s = ssd_layout(L, N, P);
  const uint g = gl_WorkGroupID.y;
  const uint h = params.head_begin + gl_WorkGroupID.x;
  const uint base = (g * params.head_count + gl_WorkGroupID.x) * s.batch;
  const uint rows_at = base + s.rows;
  const uint first = tables[params.chunks_at + 4u * g + 1u];
  const uint length = tables[params.chunks_at + 4u * g + 2u];
  mb_lanes_begin();
  const uint group = h / (params.n_heads / params.n_groups);
  const uint x_at = params.xbc_offset + h * P;
  const uint b_at = params.xbc_offset + params.n_heads * P + group * N;
  const uint c_at = b_at + params.n_groups * N;

  for (uint i = mb_linear; i < length; i += kInvocations) {
    const uint at = params.dt_offset + (first + i) * params.lddt + h;
    precise float raw = dt[at] + dt_bias[params.dt_bias_offset + h];
    const float limited = mb_min(params.dt_max, mb_max(params.dt_min, mb_softplus(raw)));
    dt[at] = limited;
    scratch[rows_at + kRowFloats * i + kRowDt] = limited;
  }
  memoryBarrierBuffer();
  barrier();
  if (mb_linear == 0u) {
    const float a = a_rate[params.a_offset + h];
    precise float cum = 0.0;
    for (uint i = 0u; i < length; ++i) {
      precise float step = scratch[rows_at + kRowFloats * i + kRowDt] * a;
      cum = cum + step;
      scratch[rows_at + kRowFloats * i + kRowCum] = cum;
    }
    scratch[base + s.chunk] = mb_exp(cum);
  }
  memoryBarrierBuffer();
  barrier();
  const float cum_last = scratch[rows_at + kRowFloats * (length - 1u) + kRowCum];
  for (uint i = mb_linear; i < length; i += kInvocations) {
    const float cum = scratch[rows_at + kRowFloats * i + kRowCum];
    precise float gap = cum_last - cum;
    scratch[rows_at + kRowFloats * i + kRowWeight] = mb_exp(gap);
    scratch[rows_at + kRowFloats * i + kRowExpCum] = mb_exp(cum);
  }
  memoryBarrierBuffer();
  barrier();
  for (uint e = mb_linear; e < length * P; e += kInvocations) {
    const uint i = e / P, p = e % P;
    scratch[base + s.v + i * P + p] = xbc[x_at + (first + i) * params.ldxbc + p];
  }
  for (uint e = mb_linear; e < length * N; e += kInvocations) {
    const uint i = e / N, n = e % N;
    const uint row = (first + i) * params.ldxbc;
    scratch[base + s.q + i * N + n] = xbc[c_at + row + n];
    precise float key = scratch[rows_at + kRowFloats * i + kRowDt] * xbc[b_at + row + n];
    scratch[base + s.kt + n * L + i] = key;
    precise float weighted = key * scratch[rows_at + kRowFloats * i + kRowWeight];
    scratch[base + s.ktw + n * L + i] = weighted;
  }
  // diag_i: clusters of sixteen invocations take the positions in turn.
  const uint clusters = kInvocations / kLanes;
  const uint lane = mb_linear % kLanes;
  const float d_head = d_skip[params.d_offset + (params.d_per_channel != 0u ? 0u : h)];
  for (uint i0 = 0u; i0 < length; i0 += clusters) {
    const uint i = i0 + mb_linear / kLanes;
    precise float acc = 0.0;
    if (i < length) {
      const uint row = (first + i) * params.ldxbc;
      for (uint n = lane; n < N; n += kLanes) acc = mb_fma(xbc[c_at + row + n], xbc[b_at + row + n], acc);
    }
    const float total = mb_tree16(acc);
    if (i < length && lane == 0u) {
      precise float qk = scratch[rows_at + kRowFloats * i + kRowDt] * total;
      precise float diag = params.d_per_channel != 0u ? qk : d_head + qk;
      scratch[rows_at + kRowFloats * i + kRowDiag] = diag;
    }
  }
}

// SPDX-License-Identifier: MIT
// The inputs of one chunk of Mamba-3's SSD form for one head (mamba3_kernels.inc's
// scan_chunked), one workgroup per (chunk, head) batch, into the batch's scratch (ssd_layout.glsl),
// after mamba3_prepare (BCNorm, velocities) and mamba3_angles (each row's phases):
//   dt_i, lambda_i, A dt_i (mb_token_scalars); cum_i = cum_{i-1} + A dt_i from 0;
//   k_i, q_i: B + b_bias and C + c_bias, rotated pairwise by the row's phases (Kraw = k, Q = q);
//   gamma_i = lambda_i dt_i; sigma_i = dt_{i+1} (1 - lambda_{i+1}), the next position's (the
//   window's last position has sigma 0: its beta term waits in the state's k and v);
//   Kt[n][i] = (gamma_i + sigma_i) k_i[n]; Ktw = Kt exp(cum_last - cum_i); V = x;
//   diag_i = D + gamma_i (q_i . k_i) in the sixteen-lane order of the CPU's dot;
//   Chunk: exp(cum_last), and for a window's first chunk the fold factor dt_0 (1 - lambda_0).
// Included by ssd_prep_mamba3.comp and ssd_prep_mamba3_subgroup.comp (MB_SUBGROUP).
#include "mb_subgroup.glsl"

layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint kInvocations = 128;  // a multiple of 64
const uint kLanes = 16;

#include "mb_mamba3.glsl"
#include "mb_lanes.glsl"
#include "ssd_layout.glsl"

layout(std430, set = 0, binding = 0) coherent buffer Scratch { float scratch[]; };
layout(std430, set = 0, binding = 1) readonly buffer Tables { uint tables[]; };
layout(std430, set = 0, binding = 2) readonly buffer Proj { float proj[]; };        // [rows, ldp], prepared
layout(std430, set = 0, binding = 3) readonly buffer DtBias { float dt_bias[]; };   // [H]
layout(std430, set = 0, binding = 4) readonly buffer BBias { float b_bias[]; };     // [H, N]
layout(std430, set = 0, binding = 5) readonly buffer CBias { float c_bias[]; };     // [H, N]
layout(std430, set = 0, binding = 6) readonly buffer Skip { float d_skip[]; };      // [H]

layout(push_constant) uniform Params {
  uint chunk, states, headdim;  // L, N, P
  uint head_begin, head_count, chunks_at;
  uint n_heads, n_groups, n_angles, angle_slots;
  uint ldp, proj_offset;
  uint dt_bias_offset, b_bias_offset, c_bias_offset, d_offset;
  float a_floor;
  uint angles_at;  // mamba3_angles' phases: [round row][H][angle_slots]
} params;

TokenScalars scalars_of(uint row, uint h) {
  const uint at = params.proj_offset + row * params.ldp + 2u * params.n_heads * params.headdim +
                  2u * params.n_groups * params.states;
  const uint H = params.n_heads;
  return mb_token_scalars(proj[at + h], dt_bias[params.dt_bias_offset + h], proj[at + H + h], proj[at + 2u * H + h],
                          params.a_floor);
}

void main() {
  const uint L = params.chunk, N = params.states, P = params.headdim, H = params.n_heads;
  const SsdLayout s = ssd_layout(L, N, P);
  const uint g = gl_WorkGroupID.y;
  const uint h = params.head_begin + gl_WorkGroupID.x;
  const uint base = (g * params.head_count + gl_WorkGroupID.x) * s.batch;
  const uint rows_at = base + s.rows;
  const uint first = tables[params.chunks_at + 4u * g + 1u];
  const uint length = tables[params.chunks_at + 4u * g + 2u];
  const uint flags = tables[params.chunks_at + 4u * g + 3u];
  mb_lanes_begin();

  for (uint i = mb_linear; i < length; i += kInvocations) {
    const TokenScalars t = scalars_of(first + i, h);
    scratch[rows_at + kRowFloats * i + kRowDt] = t.dt;
    scratch[rows_at + kRowFloats * i + kRowLambda] = t.lambda;
    scratch[rows_at + kRowFloats * i + kRowCum] = t.adt;  // replaced by the cumulative sum below
  }
  if (mb_linear == 0u) {
    precise float sigma_last = 0.0;
    if ((flags & kWindowEnd) == 0u) {
      const TokenScalars next = scalars_of(first + length, h);
      precise float keep = 1.0 - next.lambda;
      sigma_last = next.dt * keep;
    }
    scratch[base + s.chunk + 2u] = sigma_last;
  }
  memoryBarrierBuffer();
  barrier();
  if (mb_linear == 0u) {
    precise float cum = 0.0;
    for (uint i = 0u; i < length; ++i) {
      cum = cum + scratch[rows_at + kRowFloats * i + kRowCum];
      scratch[rows_at + kRowFloats * i + kRowCum] = cum;
    }
    scratch[base + s.chunk] = mb_exp(cum);
    if ((flags & kWindowStart) != 0u) {
      precise float keep = 1.0 - scratch[rows_at + kRowLambda];
      precise float fold = scratch[rows_at + kRowDt] * keep;
      scratch[base + s.chunk + 1u] = fold;
    }
  }
  memoryBarrierBuffer();
  barrier();
  const float cum_last = scratch[rows_at + kRowFloats * (length - 1u) + kRowCum];
  const float sigma_last = scratch[base + s.chunk + 2u];
  for (uint i = mb_linear; i < length; i += kInvocations) {
    const float cum = scratch[rows_at + kRowFloats * i + kRowCum];
    precise float gap = cum_last - cum;
    scratch[rows_at + kRowFloats * i + kRowWeight] = mb_exp(gap);
    scratch[rows_at + kRowFloats * i + kRowExpCum] = mb_exp(cum);
  }
  memoryBarrierBuffer();
  barrier();
  const uint group = h / (H / params.n_groups);
  const uint b_at = 2u * H * P + group * N;
  const uint c_at = b_at + params.n_groups * N;
  for (uint e = mb_linear; e < length * N; e += kInvocations) {
    const uint i = e / N, n = e % N;
    const uint row = params.proj_offset + (first + i) * params.ldp;
    // The pair (2a, 2a + 1) holding n is rotated together; each invocation keeps its own entry.
    const uint lead = n < 2u * params.n_angles ? n & ~1u : n;
    precise float k0 = proj[row + b_at + lead] + b_bias[params.b_bias_offset + h * N + lead];
    precise float q0 = proj[row + c_at + lead] + c_bias[params.c_bias_offset + h * N + lead];
    float k_value = k0, q_value = q0;
    if (n < 2u * params.n_angles) {
      precise float k1 = proj[row + b_at + lead + 1u] + b_bias[params.b_bias_offset + h * N + lead + 1u];
      precise float q1 = proj[row + c_at + lead + 1u] + c_bias[params.c_bias_offset + h * N + lead + 1u];
      float sine, cosine;
      mb_sincos(scratch[params.angles_at + ((first + i) * H + h) * params.angle_slots + n / 2u], sine, cosine);
      precise float k_rotated = n == lead ? cosine * k0 - sine * k1 : sine * k0 + cosine * k1;
      precise float q_rotated = n == lead ? cosine * q0 - sine * q1 : sine * q0 + cosine * q1;
      k_value = k_rotated;
      q_value = q_rotated;
    }
    scratch[base + s.kraw + i * N + n] = k_value;
    scratch[base + s.q + i * N + n] = q_value;
    const float dt = scratch[rows_at + kRowFloats * i + kRowDt];
    precise float gamma = scratch[rows_at + kRowFloats * i + kRowLambda] * dt;
    float sigma = sigma_last;
    if (i + 1u < length) {
      precise float keep = 1.0 - scratch[rows_at + kRowFloats * (i + 1u) + kRowLambda];
      precise float next = scratch[rows_at + kRowFloats * (i + 1u) + kRowDt] * keep;
      sigma = next;
    }
    precise float scale = gamma + sigma;
    precise float key = scale * k_value;
    scratch[base + s.kt + n * L + i] = key;
    precise float weighted = key * scratch[rows_at + kRowFloats * i + kRowWeight];
    scratch[base + s.ktw + n * L + i] = weighted;
  }
  for (uint e = mb_linear; e < length * P; e += kInvocations) {
    const uint i = e / P, p = e % P;
    scratch[base + s.v + i * P + p] = proj[params.proj_offset + (first + i) * params.ldp + H * P + h * P + p];
  }
  memoryBarrierBuffer();
  barrier();
  // diag_i: clusters of sixteen invocations take the positions in turn.
  const uint clusters = kInvocations / kLanes;
  const uint lane = mb_linear % kLanes;
  const float d = d_skip[params.d_offset + h];
  for (uint i0 = 0u; i0 < length; i0 += clusters) {
    const uint i = i0 + mb_linear / kLanes;
    precise float acc = 0.0;
    if (i < length)
      for (uint n = lane; n < N; n += kLanes) acc = mb_fma(scratch[base + s.q + i * N + n], scratch[base + s.kraw + i * N + n], acc);
    const float total = mb_tree16(acc);
    if (i < length && lane == 0u) {
      precise float gamma = scratch[rows_at + kRowFloats * i + kRowLambda] * scratch[rows_at + kRowFloats * i + kRowDt];
      precise float qk = gamma * total;
      precise float diag = d + qk;
      scratch[rows_at + kRowFloats * i + kRowDiag] = diag;
    }
  }
}

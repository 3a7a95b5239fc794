// SPDX-License-Identifier: MIT
// The sequential Mamba-3 SISO mixer of src/ops/mamba3_scan.h over the parts of a round, after
// mamba3_prepare (BCNorm, angle velocities), with the bits of mamba3_kernels.inc's
// scan_sequential. Per head h and position t:
//   dt, lambda, A dt (mb_token_scalars); alpha = exp(A dt); beta = (alpha dt) (1 - lambda);
//   gamma = lambda dt; the phases advance by omega dt (mb_angle_step); k = B + b_bias and
//   q = C + c_bias, their first 2 na entries rotated pairwise by the phases; v = x;
//   S[n][p] = fma(alpha, S, fma(beta v_prev[p], k_prev[n], (gamma v[p]) k[n]))
//   y[p] = fma(D, v[p], acc), acc = 0; acc = fma(S[n][p], q[n], acc) for n ascending
//   out = (y (1 / sqrt(mean(y^2) + eps))) w silu(z) with the gate norm, else y silu(z)
// with (k_prev, v_prev) the previous position's (the state's k and v at the first).
//
// The walk over time is mamba2_scan.glsl's: one workgroup per (head, part), each channel's
// state in registers over kLanes invocations of kRegs states, the chain over n pipelined across
// the lanes (lane j works on position tick - j), and the inputs staged kBlock positions at a
// time into a two-block shared ring: the token scalars, k, q and v, computed here (the phases by
// one invocation per angle, walking the block's positions in order). The last lane writes y
// before the gate; at each block boundary, and at the end, the rows whose y is complete are
// gated in place: their sum of squares in the CPU's sixteen-lane order, one cluster of sixteen
// invocations per row.
//
// Included by mamba3_scan[_parts][_subgroup].comp, as mamba2_scan.glsl is.
#include "mb_subgroup.glsl"

layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint kInvocations = 64;  // a multiple of 64, >= kHeaddim * kLanes
layout(constant_id = 1) const uint kLanes = 1;         // invocations per channel (a power of two)
layout(constant_id = 2) const uint kRegs = 16;         // states per invocation: ceil(N / kLanes)
layout(constant_id = 3) const uint kBlock = 8;         // positions staged at a time, >= kLanes - 1
layout(constant_id = 4) const uint kHeaddim = 64;      // P
layout(constant_id = 5) const uint kStates = 128;      // N
layout(constant_id = 6) const uint kAngleSlots = 1;    // max(na, 1)
const uint kSixteen = 16;

#include "mb_mamba3.glsl"
#include "mb_lanes.glsl"

layout(std430, set = 0, binding = 0) readonly buffer Proj { float proj[]; };  // [rows, ldp], prepared
layout(std430, set = 0, binding = 1) coherent buffer Y { float y[]; };        // [rows, ldy]
layout(std430, set = 0, binding = 2) readonly buffer DtBias { float dt_bias[]; };  // [H]
layout(std430, set = 0, binding = 3) readonly buffer BBias { float b_bias[]; };    // [H, N]
layout(std430, set = 0, binding = 4) readonly buffer CBias { float c_bias[]; };    // [H, N]
layout(std430, set = 0, binding = 5) readonly buffer Skip { float d_skip[]; };     // [H]
layout(std430, set = 0, binding = 6) readonly buffer GateNorm { float gate_norm[]; };  // [H * P]
layout(std430, set = 0, binding = 7) readonly buffer Parts { uint part_rows[]; };  // [parts][2] from parts_at
layout(std430, set = 0, binding = 8) buffer State { float values[]; } states[MB_MAX_PARTS];  // the layer's block

layout(push_constant) uniform Params {
  uint n_heads, n_groups, n_angles;
  uint ldp, ldy, proj_offset, y_offset;
  uint dt_bias_offset, b_bias_offset, c_bias_offset, d_offset, gate_offset, has_gate;
  float a_floor, eps;
  uint ssm_offset, k_offset, v_offset, angle_offset;  // each state's parts (Mamba3StateLayout)
  uint parts_at;
} params;

#if MB_MAX_PARTS > 1
#define STATE states[part].values  // part is uniform over the workgroup
#else
#define STATE states[0].values
#endif

shared float k_ring[2 * kBlock * kStates];  // [2 blocks][kBlock][N]
shared float q_ring[2 * kBlock * kStates];
shared float v_ring[2 * kBlock * kHeaddim];
shared float scalar_ring[2 * kBlock * 4];  // alpha, beta, gamma, dt
shared float block_angles[kBlock * kAngleSlots];
shared float inverse_rms[kInvocations / kSixteen];

uint first = 0u, positions = 0u, h = 0u, part = 0u;

// Column offsets inside an in_proj row (mamba3_scan.h's proj_width order).
uint x_column() { return params.n_heads * kHeaddim; }
uint b_column() { return 2u * params.n_heads * kHeaddim; }
uint dt_column() { return b_column() + 2u * params.n_groups * kStates; }

// Stages block `block` into ring half block & 1, advancing the phases (held by the angle
// invocations in `angle`).
void stage_block(uint block, inout float angle) {
  const uint begin = block * kBlock;
  const uint count = min(kBlock, positions - begin);
  const uint ring = (block & 1u) * kBlock;
  const uint H = params.n_heads;
  for (uint i = mb_linear; i < count; i += kInvocations) {
    const uint row = params.proj_offset + (first + begin + i) * params.ldp + dt_column();
    const TokenScalars t =
        mb_token_scalars(proj[row + h], dt_bias[params.dt_bias_offset + h], proj[row + H + h], proj[row + 2u * H + h],
                         params.a_floor);
    const float alpha = mb_exp(t.adt);
    precise float alpha_dt = alpha * t.dt;
    precise float keep = 1.0 - t.lambda;
    precise float beta = alpha_dt * keep;
    precise float gamma = t.lambda * t.dt;
    scalar_ring[4u * (ring + i)] = alpha;
    scalar_ring[4u * (ring + i) + 1u] = beta;
    scalar_ring[4u * (ring + i) + 2u] = gamma;
    scalar_ring[4u * (ring + i) + 3u] = t.dt;
  }
  barrier();
  if (mb_linear < params.n_angles) {
    const uint omega_column = dt_column() + 3u * H + mb_linear;
    for (uint i = 0u; i < count; ++i) {
      const float omega = proj[params.proj_offset + (first + begin + i) * params.ldp + omega_column];
      angle = mb_angle_step(angle, omega, scalar_ring[4u * (ring + i) + 3u]);
      block_angles[i * kAngleSlots + mb_linear] = angle;
    }
  }
  barrier();
  const uint group = h / (H / params.n_groups);
  const uint b_at = b_column() + group * kStates;
  const uint c_at = b_at + params.n_groups * kStates;
  for (uint e = mb_linear; e < count * kStates; e += kInvocations) {
    const uint i = e / kStates, n = e % kStates;
    const uint row = params.proj_offset + (first + begin + i) * params.ldp;
    // The pair (2a, 2a + 1) holding n is rotated together; each invocation keeps its own entry.
    const uint lead = n < 2u * params.n_angles ? n & ~1u : n;
    precise float k0 = proj[row + b_at + lead] + b_bias[params.b_bias_offset + h * kStates + lead];
    precise float q0 = proj[row + c_at + lead] + c_bias[params.c_bias_offset + h * kStates + lead];
    float k_value = k0, q_value = q0;
    if (n < 2u * params.n_angles) {
      precise float k1 = proj[row + b_at + lead + 1u] + b_bias[params.b_bias_offset + h * kStates + lead + 1u];
      precise float q1 = proj[row + c_at + lead + 1u] + c_bias[params.c_bias_offset + h * kStates + lead + 1u];
      float s, c;
      mb_sincos(block_angles[i * kAngleSlots + n / 2u], s, c);
      precise float k_rotated = n == lead ? c * k0 - s * k1 : s * k0 + c * k1;
      precise float q_rotated = n == lead ? c * q0 - s * q1 : s * q0 + c * q1;
      k_value = k_rotated;
      q_value = q_rotated;
    }
    k_ring[(ring + i) * kStates + n] = k_value;
    q_ring[(ring + i) * kStates + n] = q_value;
  }
  for (uint e = mb_linear; e < count * kHeaddim; e += kInvocations) {
    const uint i = e / kHeaddim, p = e % kHeaddim;
    v_ring[(ring + i) * kHeaddim + p] = proj[params.proj_offset + (first + begin + i) * params.ldp + x_column() + h * kHeaddim + p];
  }
}

// Gates rows [begin, end) of the part in place (gate_head), one cluster of sixteen invocations
// per row at a time.
void gate_rows(uint begin, uint end) {
  memoryBarrierBuffer();
  barrier();  // the rows' y are written
  const uint clusters = kInvocations / kSixteen;
  for (uint r0 = begin; r0 < end; r0 += clusters) {
    const uint t = r0 + mb_linear / kSixteen;
    const uint y_row = params.y_offset + (first + t) * params.ldy + h * kHeaddim;
    if (params.has_gate != 0u) {
      precise float acc = 0.0;
      if (t < end)
        for (uint p = mb_linear % kSixteen; p < kHeaddim; p += kSixteen) acc = mb_fma(y[y_row + p], y[y_row + p], acc);
      const float total = mb_tree16(acc);
      if (t < end && mb_linear % kSixteen == 0u) {
        const float mean_square = mb_div(total, float(kHeaddim));
        precise float shifted = mean_square + params.eps;
        inverse_rms[mb_linear / kSixteen] = mb_div(1.0, mb_sqrt(shifted));
      }
      barrier();  // every cluster's sum has read its row
    }
    const uint rows = min(clusters, end - r0);
    for (uint e = mb_linear; e < rows * kHeaddim; e += kInvocations) {
      const uint i = e / kHeaddim, p = e % kHeaddim;
      const uint at = params.y_offset + (first + r0 + i) * params.ldy + h * kHeaddim + p;
      const float z = proj[params.proj_offset + (first + r0 + i) * params.ldp + h * kHeaddim + p];
      precise float value = y[at];
      if (params.has_gate != 0u) value = (value * inverse_rms[i]) * gate_norm[params.gate_offset + h * kHeaddim + p];
      precise float gated = value * mb_silu(z);
      y[at] = gated;
    }
    barrier();  // inverse_rms is rewritten by the next rows
  }
}

void main() {
  h = gl_WorkGroupID.x;
  part = gl_WorkGroupID.y;
  mb_lanes_begin();
  const uint channel = mb_linear / kLanes;
  const uint lane = mb_linear % kLanes;
  const bool valid = channel < kHeaddim;
  const uint column = valid ? channel : 0u;
  first = part_rows[params.parts_at + 2u * part];
  positions = part_rows[params.parts_at + 2u * part + 1u];
  const uint ssm_at = params.ssm_offset + h * kStates * kHeaddim + column;
  const uint k_at = params.k_offset + h * kStates;

  precise float S[kRegs];
  float k_prev[kRegs];
  for (uint r = 0u; r < kRegs; ++r) {
    const uint n = lane * kRegs + r;
    S[r] = valid && n < kStates ? STATE[ssm_at + n * kHeaddim] : 0.0;
    k_prev[r] = n < kStates ? STATE[k_at + n] : 0.0;
  }
  float v_prev = STATE[params.v_offset + h * kHeaddim + column];
  const uint angle_at = params.angle_offset + h * kAngleSlots + min(mb_linear, kAngleSlots - 1u);
  float angle = STATE[angle_at];
  const float d = d_skip[params.d_offset + h];

  precise float carried = 0.0;
  uint gated = 0u;
  const uint ticks = positions > 0u ? positions + kLanes - 1u : 0u;
  for (uint tick = 0u; tick < ticks; ++tick) {
    if (tick % kBlock == 0u && tick < positions) {
      const uint complete = tick + 1u > kLanes ? tick + 1u - kLanes : 0u;  // rows whose y is written
      gate_rows(gated, complete);
      gated = complete;
      barrier();  // the ring half about to be refilled has been read
      stage_block(tick / kBlock, angle);
      barrier();
    }
    precise float acc = lane == 0u ? 0.0 : carried;
    const int t = int(tick) - int(lane);
    if (valid && t >= 0 && t < int(positions)) {
      const uint at = (uint(t) / kBlock & 1u) * kBlock + uint(t) % kBlock;
      const float alpha = scalar_ring[4u * at], beta = scalar_ring[4u * at + 1u], gamma = scalar_ring[4u * at + 2u];
      const float v = v_ring[at * kHeaddim + channel];
      precise float bv = beta * v_prev;
      precise float gv = gamma * v;
      for (uint r = 0u; r < kRegs; ++r) {
        const uint n = lane * kRegs + r;
        if (n < kStates) {
          const float k = k_ring[at * kStates + n];
          precise float drive = gv * k;
          S[r] = mb_fma(alpha, S[r], mb_fma(bv, k_prev[r], drive));
          acc = mb_fma(S[r], q_ring[at * kStates + n], acc);
          k_prev[r] = k;
        }
      }
      v_prev = v;
      if (lane == kLanes - 1u) y[params.y_offset + (first + uint(t)) * params.ldy + h * kHeaddim + channel] = mb_fma(d, v, acc);
    }
    if (kLanes > 1u) carried = mb_from_previous(acc, kLanes);
  }
  gate_rows(gated, positions);

  if (valid)
    for (uint r = 0u; r < kRegs; ++r) {
      const uint n = lane * kRegs + r;
      if (n < kStates) STATE[ssm_at + n * kHeaddim] = S[r];
    }
  if (positions == 0u) return;
  if (channel == 0u)
    for (uint r = 0u; r < kRegs; ++r) {
      const uint n = lane * kRegs + r;
      if (n < kStates) STATE[k_at + n] = k_prev[r];
    }
  if (valid && lane == 0u) STATE[params.v_offset + h * kHeaddim + channel] = v_prev;
  if (mb_linear < params.n_angles) STATE[angle_at] = angle;
}

// SPDX-License-Identifier: MIT
// The output gate of Mamba-3's chunked form (mamba3_kernels.inc's gate_head), one workgroup per
// (chunk, head) batch, from the batch's Ypre (ssd_layout.glsl) into the op's y rows:
//   out = (y (1 / sqrt(mean(y^2) + eps))) w silu(z) with the gate norm, else y silu(z)
// the sum of squares in the CPU's sixteen-lane order, one cluster of sixteen invocations per row.
// Included by ssd_gate_mamba3.comp and ssd_gate_mamba3_subgroup.comp (MB_SUBGROUP).
#include "mb_subgroup.glsl"

layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint kInvocations = 128;  // a multiple of 64
const uint kLanes = 16;

#include "mb_math.glsl"
#include "mb_lanes.glsl"
#include "ssd_layout.glsl"

layout(std430, set = 0, binding = 0) readonly buffer Scratch { float scratch[]; };
layout(std430, set = 0, binding = 1) readonly buffer Tables { uint tables[]; };
layout(std430, set = 0, binding = 2) readonly buffer Proj { float proj[]; };           // [rows, ldp]: z first
layout(std430, set = 0, binding = 3) readonly buffer GateNorm { float gate_norm[]; };  // [H * P]
layout(std430, set = 0, binding = 4) writeonly buffer Y { float y[]; };                // [rows, ldy]

layout(push_constant) uniform Params {
  uint chunk, states, headdim;  // L, N, P
  uint head_begin, head_count, chunks_at;
  uint ldp, proj_offset, ldy, y_offset, gate_offset, has_gate;
  float eps;
} params;

shared float inverse_rms[kInvocations / kLanes];

void main() {
  const uint P = params.headdim;
  const SsdLayout s = ssd_layout(params.chunk, params.states, P);
  const uint g = gl_WorkGroupID.y;
  const uint h = params.head_begin + gl_WorkGroupID.x;
  const uint base = (g * params.head_count + gl_WorkGroupID.x) * s.batch;
  const uint first = tables[params.chunks_at + 4u * g + 1u];
  const uint length = tables[params.chunks_at + 4u * g + 2u];
  mb_lanes_begin();
  const uint clusters = kInvocations / kLanes;
  for (uint i0 = 0u; i0 < length; i0 += clusters) {
    if (params.has_gate != 0u) {
      const uint i = i0 + mb_linear / kLanes;
      precise float acc = 0.0;
      if (i < length)
        for (uint p = mb_linear % kLanes; p < P; p += kLanes)
          acc = mb_fma(scratch[base + s.ypre + i * P + p], scratch[base + s.ypre + i * P + p], acc);
      const float total = mb_tree16(acc);
      if (i < length && mb_linear % kLanes == 0u) {
        const float mean_square = mb_div(total, float(P));
        precise float shifted = mean_square + params.eps;
        inverse_rms[mb_linear / kLanes] = mb_div(1.0, mb_sqrt(shifted));
      }
      barrier();
    }
    const uint rows = min(clusters, length - i0);
    for (uint e = mb_linear; e < rows * P; e += kInvocations) {
      const uint r = e / P, p = e % P, i = i0 + r;
      precise float value = scratch[base + s.ypre + i * P + p];
      if (params.has_gate != 0u) value = (value * inverse_rms[r]) * gate_norm[params.gate_offset + h * P + p];
      const float z = proj[params.proj_offset + (first + i) * params.ldp + h * P + p];
      precise float gated = value * mb_silu(z);
      y[params.y_offset + (first + i) * params.ldy + h * P + p] = gated;
    }
    barrier();  // inverse_rms is rewritten by the next rows
  }
}

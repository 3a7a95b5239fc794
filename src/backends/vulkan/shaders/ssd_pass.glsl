// SPDX-License-Identifier: MIT
// The state passing of the chunked SSD form (ssd_chunk.inc's last step) over the parts of a
// round, one workgroup per (head, part), its invocations over the state's N x P elements, each
// element walking the part's chunks in order:
//   (Mamba-3, a window's first chunk) H = fma(f k_prev[n], v_prev[p], H), the boundary fold
//   Hent_c = H;  H = fma(exp(cum_last_c), H, dH_c)
// with the bits of the CPU. The fold's k_prev and v_prev are the state's k and v before the
// part's first window, else the k and x of the previous window's last position; f is the
// window's first position's dt (1 - lambda) (ssd_prep_mamba3.comp puts it in Chunk[1]).
// Mamba-3 (write_kv) also leaves the k and x of the part's last position as the state's k and v.
//
// Included by ssd_pass.comp (one part per dispatch) and ssd_pass_parts.comp (MB_MAX_PARTS states,
// indexed by the workgroup's part).
layout(local_size_x = 256) in;

#include "mb_math.glsl"
#include "ssd_layout.glsl"

layout(std430, set = 0, binding = 0) buffer Scratch { float scratch[]; };
layout(std430, set = 0, binding = 1) readonly buffer Tables { uint tables[]; };
layout(std430, set = 0, binding = 2) buffer State { float values[]; } states[MB_MAX_PARTS];

layout(push_constant) uniform Params {
  uint chunk, states, headdim;  // L, N, P
  uint head_begin, head_count, chunks_at, parts_at, part_base;
  uint ssm_offset;          // each state's [H, N, P] SSM state
  uint fold, write_kv;      // Mamba-3: the boundary fold; the k and v states
  uint k_offset, v_offset;  // Mamba-3: each state's [H, N] k and [H, P] v
} params;

#if MB_MAX_PARTS > 1
#define STATE states[gl_WorkGroupID.y].values  // uniform over the workgroup
#else
#define STATE states[0].values
#endif

void main() {
  const uint kStates = params.states, kHeaddim = params.headdim;
  const SsdLayout s = ssd_layout(params.chunk, kStates, kHeaddim);
  const uint h = params.head_begin + gl_WorkGroupID.x;
  const uint part = params.part_base + gl_WorkGroupID.y;
  const uint first_chunk = tables[params.parts_at + 4u * part];
  const uint chunks = tables[params.parts_at + 4u * part + 1u];
  if (chunks == 0u) return;  // uniform
  const uint ssm_at = params.ssm_offset + h * kStates * kHeaddim;
  for (uint e = gl_LocalInvocationIndex; e < kStates * kHeaddim; e += gl_WorkGroupSize.x) {
    const uint n = e / kHeaddim, p = e % kHeaddim;
    precise float state = STATE[ssm_at + e];
    for (uint c = 0u; c < chunks; ++c) {
      const uint g = first_chunk + c;
      const uint base = (g * params.head_count + gl_WorkGroupID.x) * s.batch;
      const uint flags = tables[params.chunks_at + 4u * g + 3u];
      if (params.fold != 0u && (flags & kWindowStart) != 0u) {
        float k_prev, v_prev;
        if (c == 0u) {
          k_prev = STATE[params.k_offset + h * kStates + n];
          v_prev = STATE[params.v_offset + h * kHeaddim + p];
        } else {
          const uint previous = base - params.head_count * s.batch;
          const uint last = tables[params.chunks_at + 4u * (g - 1u) + 2u] - 1u;
          k_prev = scratch[previous + s.kraw + last * kStates + n];
          v_prev = scratch[previous + s.v + last * kHeaddim + p];
        }
        precise float fk = scratch[base + s.chunk + 1u] * k_prev;
        state = mb_fma(fk, v_prev, state);
      }
      scratch[base + s.hent + e] = state;
      state = mb_fma(scratch[base + s.chunk], state, scratch[base + s.dh + e]);
    }
    STATE[ssm_at + e] = state;
  }
  if (params.write_kv == 0u) return;
  barrier();  // every fold has read the old k and v
  const uint g = first_chunk + chunks - 1u;
  const uint base = (g * params.head_count + gl_WorkGroupID.x) * s.batch;
  const uint last = tables[params.chunks_at + 4u * g + 2u] - 1u;
  for (uint n = gl_LocalInvocationIndex; n < kStates; n += gl_WorkGroupSize.x)
    STATE[params.k_offset + h * kStates + n] = scratch[base + s.kraw + last * kStates + n];
  for (uint p = gl_LocalInvocationIndex; p < kHeaddim; p += gl_WorkGroupSize.x)
    STATE[params.v_offset + h * kHeaddim + p] = scratch[base + s.v + last * kHeaddim + p];
}

// SPDX-License-Identifier: MIT
// Depthwise causal conv with carried history + SiLU (src/ops/causal_conv.h) over the parts of a
// round: part p is a run of rows of x and y (parts table: first row, row count) with its own
// history, histories[p]. Workgroups are (channel block, part); one invocation per channel walks
// its part's positions in order: acc = bias (or 0); acc = fma(w[k, c], window[k], acc) for
// k = 0..K-1, oldest input first; y = silu(acc). Afterwards the history holds the part's last
// K-1 inputs, so running T positions at once equals T single-position runs bit for bit.
//
// Included by causal_conv_parts.comp (MB_MAX_PARTS histories, indexed by the workgroup's part:
// needs shaderStorageBufferArrayDynamicIndexing) and causal_conv.comp (one part per dispatch,
// the fallback without that feature). The arithmetic is the same in both.
#include "mb_math.glsl"

layout(local_size_x = 64) in;

layout(std430, set = 0, binding = 0) readonly buffer X { float x[]; };        // [rows, ldx] from x_offset
layout(std430, set = 0, binding = 1) readonly buffer Weight { float w[]; };   // [K, channels] tap-major
layout(std430, set = 0, binding = 2) readonly buffer Bias { float bias[]; };  // [channels]
layout(std430, set = 0, binding = 3) writeonly buffer Y { float y[]; };       // [rows, ldy] from y_offset
layout(std430, set = 0, binding = 4) readonly buffer Parts { uint part_rows[]; };  // [parts][2] from parts_at
layout(std430, set = 0, binding = 5) buffer History { float values[]; } histories[MB_MAX_PARTS];  // [K-1, channels] from history_offset

layout(push_constant) uniform Params {
  uint channels, kernel_size;
  uint ldx, ldy;
  uint x_offset, y_offset, w_offset, bias_offset, history_offset;
  uint has_bias;
  uint parts_at;
} params;

#if MB_MAX_PARTS > 1
#define HISTORY histories[part].values  // part is uniform over the workgroup
#else
#define HISTORY histories[0].values
#endif

void main() {
  const uint c = gl_GlobalInvocationID.x;
  const uint part = gl_WorkGroupID.y;
  if (c >= params.channels) return;
  const uint first = part_rows[params.parts_at + 2u * part];
  const uint positions = part_rows[params.parts_at + 2u * part + 1u];
  const int taps = int(params.kernel_size);
  const uint x_base = params.x_offset + first * params.ldx + c;
  const uint h_base = params.history_offset + c;
  // Input of position p of channel c; positions -(K-1)..-1 are the history's rows, oldest first.
#define INPUT_AT(p) ((p) >= 0 ? x[x_base + uint(p) * params.ldx] : HISTORY[h_base + uint((p) + taps - 1) * params.channels])
  for (uint t = 0u; t < positions; ++t) {
    precise float acc = params.has_bias != 0u ? bias[params.bias_offset + c] : 0.0;
    for (int k = 0; k < taps; ++k)
      acc = mb_fma(w[params.w_offset + uint(k) * params.channels + c], INPUT_AT(int(t) - (taps - 1) + k), acc);
    y[params.y_offset + (first + t) * params.ldy + c] = mb_silu(acc);
  }
  // The new history is positions P-(K-1)..P-1 (P = positions). Those before 0 come from the old
  // history at a higher row than the one written, so copying rows in ascending order is safe.
  for (int j = 0; j + 1 < taps; ++j) {
    const float value = INPUT_AT(int(positions) - (taps - 1) + j);
    HISTORY[h_base + uint(j) * params.channels] = value;
  }
#undef INPUT_AT
}

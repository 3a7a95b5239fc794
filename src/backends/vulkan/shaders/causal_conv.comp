#version 450
// Depthwise causal conv with carried history + SiLU (src/ops/causal_conv.h), one invocation per
// channel walking the positions in order: acc = bias (or 0); acc = fma(w[k, c], window[k], acc)
// for k = 0..K-1, oldest input first; y = silu(acc). Afterwards the history holds the last K-1
// inputs, so running T positions at once equals T single-position runs bit for bit.
#include "mb_math.glsl"

layout(local_size_x = 64) in;

layout(std430, set = 0, binding = 0) readonly buffer X { float x[]; };        // [positions, ldx] from x_offset
layout(std430, set = 0, binding = 1) readonly buffer Weight { float w[]; };   // [K, channels] tap-major
layout(std430, set = 0, binding = 2) readonly buffer Bias { float bias[]; };  // [channels]
layout(std430, set = 0, binding = 3) buffer History { float history[]; };     // [K-1, channels] from history_offset
layout(std430, set = 0, binding = 4) writeonly buffer Y { float y[]; };       // [positions, ldy] from y_offset

layout(push_constant) uniform Params {
  uint positions, channels, kernel_size;
  uint ldx, ldy;
  uint x_offset, y_offset, w_offset, bias_offset, history_offset;
  uint has_bias;
} params;

// Input of position p of channel c; positions -(K-1)..-1 are the history's rows, oldest first.
float input_at(int p, uint c) {
  if (p >= 0) return x[params.x_offset + uint(p) * params.ldx + c];
  return history[params.history_offset + uint(p + int(params.kernel_size) - 1) * params.channels + c];
}

void main() {
  const uint c = gl_GlobalInvocationID.x;
  if (c >= params.channels) return;
  const int taps = int(params.kernel_size);
  for (uint t = 0u; t < params.positions; ++t) {
    precise float acc = params.has_bias != 0u ? bias[params.bias_offset + c] : 0.0;
    for (int k = 0; k < taps; ++k)
      acc = mb_fma(w[params.w_offset + uint(k) * params.channels + c], input_at(int(t) - (taps - 1) + k, c), acc);
    y[params.y_offset + t * params.ldy + c] = mb_silu(acc);
  }
  // The new history is positions P-(K-1)..P-1 (P = params.positions). Those before 0 come from the old
  // history at a higher row than the one written, so copying rows in ascending order is safe.
  for (int j = 0; j + 1 < taps; ++j) {
    const float value = input_at(int(params.positions) - (taps - 1) + j, c);
    history[params.history_offset + uint(j) * params.channels + c] = value;
  }
}

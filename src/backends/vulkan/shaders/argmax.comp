#version 450
// SPDX-License-Identifier: MIT
// Greedy choice over rows of logits, one workgroup per row: the lowest index of the largest
// value, NaNs skipped (a row of NaNs gives 0), written as a float (exact below 2^24). This is
// std::max_element's answer for every row without NaNs, so a greedy decode on the device picks
// the tokens the host would. Only comparisons: no rounding, so any device gives these bits.
layout(local_size_x = 64) in;

layout(std430, set = 0, binding = 0) readonly buffer X { float x[]; };  // [rows, ldx] from x_offset
layout(std430, set = 0, binding = 1) buffer Y { float y[]; };           // [rows] from y_offset

layout(push_constant) uniform Params {
  uint rows, cols, ldx, x_offset, y_offset;
} params;

const uint kNone = 0xffffffffu;
shared float best_value[64];
shared uint best_index[64];

// Whether candidate (v, i) beats (bv, bi): a larger value, or an equal one at a lower index.
bool beats(float v, uint i, float bv, uint bi) {
  if (i == kNone) return false;
  if (bi == kNone) return true;
  return v > bv || (v == bv && i < bi);
}

void main() {
  const uint row = gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x;
  const uint lane = gl_LocalInvocationID.x;
  float value = 0.0;
  uint index = kNone;
  if (row < params.rows) {
    const uint base = params.x_offset + row * params.ldx;
    // Each invocation scans increasing indices, so a strict > keeps its lowest index of a tie.
    for (uint k = lane; k < params.cols; k += gl_WorkGroupSize.x) {
      const float v = x[base + k];
      if (!isnan(v) && (index == kNone || v > value)) {
        value = v;
        index = k;
      }
    }
  }
  best_value[lane] = value;
  best_index[lane] = index;
  barrier();
  for (uint width = gl_WorkGroupSize.x / 2u; width > 0u; width /= 2u) {
    if (lane < width && beats(best_value[lane + width], best_index[lane + width], best_value[lane], best_index[lane])) {
      best_value[lane] = best_value[lane + width];
      best_index[lane] = best_index[lane + width];
    }
    barrier();
  }
  if (lane == 0u && row < params.rows) y[params.y_offset + row] = best_index[0] == kNone ? 0.0 : float(best_index[0]);
}

// SPDX-License-Identifier: MIT
// The greedy choice over a row of logits: the lowest index of the largest value, NaNs skipped
// (a row of NaNs gives 0). On rows without NaNs this is std::max_element's index. The Vulkan
// shader (shaders/argmax.comp) gives the same index, so a greedy decode whose argmax runs on the
// device reads back one number per sequence instead of the vocabulary's logits.
#pragma once

#include <cmath>
#include <cstdint>

namespace mb {

inline int64_t greedy_index(const float* x, int64_t n) {
  int64_t best = -1;
  for (int64_t k = 0; k < n; ++k)
    if (!std::isnan(x[k]) && (best < 0 || x[k] > x[best])) best = k;
  return best < 0 ? 0 : best;
}

}  // namespace mb

// SPDX-License-Identifier: MIT
// Depthwise causal 1-D convolution with carried history, followed by SiLU (Mamba-1 conv1d).
//
// For position t and channel c, with K taps and the window of the last K inputs
// (oldest first; positions before the sequence come from `history`):
//   acc = bias[c] (or 0);  acc = fma(w[k, c], window[k], acc) for k = 0..K-1;  y = silu(acc)
// The history holds the last K-1 inputs of the sequence so far and is updated, so running T
// positions at once equals T single-position calls bit for bit.
#pragma once

#include <cstdint>
#include <span>

#include "core/threading.h"

namespace mb {

inline constexpr int kMaxConvKernel = 16;

struct CausalConvArgs {
  const float* x = nullptr;  // [length, ldx] pre-conv inputs, channels contiguous
  int64_t ldx = 0;
  int64_t length = 0;
  int64_t channels = 0;
  int kernel_size = 4;            // K, at most kMaxConvKernel
  const float* weight = nullptr;  // [K, channels] tap-major (transposed from the checkpoint's [channels, 1, K])
  const float* bias = nullptr;    // [channels] or null
  float* history = nullptr;       // [K-1, channels], oldest first; read and updated
  float* y = nullptr;             // [length, ldy]
  int64_t ldy = 0;
};

// Runs several independent sequences; work is split over (sequence, channel block) pairs.
void causal_conv_silu(const ComputeContext& ctx, std::span<const CausalConvArgs> sequences);
void causal_conv_silu_reference(const CausalConvArgs& args);

}  // namespace mb

// SPDX-License-Identifier: MIT
// LFM2's gated short convolution (HF Lfm2ShortConv.slow_forward), the operator of its "conv"
// layers: in_proj's output row holds B, C and x (in that order, `channels` each); per channel c
// and position t, with K taps (conv_L_cache) and the window of the last K values of B * x
// (oldest first; positions before the sequence come from `history`):
//   bx_t = B_t * x_t                                       (one f32 product)
//   acc  = 0;  acc = fma(w[k, c], bx_{t-K+1+k}, acc) for k = 0..K-1     (no bias, no activation)
//   y_t  = C_t * acc                                       (one f32 product)
// The history holds the last K-1 values of B * x (what HF's cache keeps, less its oldest column,
// which it never reads) and is updated, so running T positions at once equals T single-position
// calls bit for bit. Each value depends only on its own channel's inputs, so the result never
// depends on the thread count, the batch or the instruction set.
//
// The op is scalar code compiled once (short_conv.cc), not a Vec16 kernel per instruction set:
// it does K multiply-adds per channel and row, against the 3 d_model^2 + d_model^2 of the block's
// two products around it, and std::fma is the same correctly rounded operation everywhere.
#pragma once

#include <cstdint>
#include <span>

#include "core/threading.h"

namespace mb {

inline constexpr int kMaxShortConvKernel = 16;

struct ShortConvArgs {
  const float* bcx = nullptr;  // [length, ldbcx]: B | C | x, `channels` floats each
  int64_t ldbcx = 0;
  int64_t length = 0;
  int64_t channels = 0;
  int kernel_size = 3;            // K, 1..kMaxShortConvKernel
  const float* weight = nullptr;  // [K, channels] tap-major (the checkpoint's [channels, 1, K] re-laid)
  float* history = nullptr;       // [K-1, channels]: the last values of B * x, oldest first; updated
  float* y = nullptr;             // [length, ldy]; must not overlap bcx
  int64_t ldy = 0;
};

// Several independent sequences; work is split over (sequence, channel block) pairs.
void short_conv(const ComputeContext& ctx, std::span<const ShortConvArgs> sequences);
// Plain double-precision reference (tests only): every product and sum in double, each output
// and history value rounded to f32 once.
void short_conv_reference(const ShortConvArgs& args);

}  // namespace mb

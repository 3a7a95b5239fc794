// SPDX-License-Identifier: MIT
#include "ops/short_conv.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/error.h"

namespace mb {
namespace {

// Channels per work item: each position's B, C and x of an item are 1 KiB runs.
constexpr int64_t kShortConvItemChannels = 256;

void check_args(const ShortConvArgs& a) {
  MB_CHECK(a.length >= 0 && a.channels > 0 && a.kernel_size >= 1 && a.kernel_size <= kMaxShortConvKernel);
  MB_CHECK(a.ldbcx >= 3 * a.channels && a.ldy >= a.channels);
  MB_CHECK(a.weight != nullptr && (a.kernel_size == 1 || a.history != nullptr));
}

void short_conv_range(const ShortConvArgs& a, int64_t c_begin) {
  const int64_t c_end = std::min(c_begin + kShortConvItemChannels, a.channels);
  const int K = a.kernel_size;
  const int64_t C = a.channels;
  // B * x of position p; positions -(K-1)..-1 are the history's rows, oldest first. The product is
  // recomputed wherever it is read: one f32 multiplication, the same bits each time.
  const auto bx = [&](int64_t p, int64_t c) -> float {
    if (p < 0) return a.history[(p + K - 1) * C + c];
    const float* row = a.bcx + p * a.ldbcx;
    return row[c] * row[2 * C + c];
  };
  for (int64_t t = 0; t < a.length; ++t) {
    const float* gate = a.bcx + t * a.ldbcx + C;
    float* y = a.y + t * a.ldy;
    for (int64_t c = c_begin; c < c_end; ++c) {
      float acc = 0.0f;
      for (int k = 0; k < K; ++k) acc = std::fma(a.weight[k * C + c], bx(t - (K - 1) + k, c), acc);
      y[c] = gate[c] * acc;
    }
  }
  // The new history is positions length-(K-1)..length-1. Those before 0 come from the old history
  // at a higher row than the one written, so writing rows in ascending order is safe.
  for (int j = 0; j + 1 < K; ++j)
    for (int64_t c = c_begin; c < c_end; ++c) a.history[j * C + c] = bx(a.length - (K - 1) + j, c);
}

int64_t items_of(const ShortConvArgs& a) {
  return (a.channels + kShortConvItemChannels - 1) / kShortConvItemChannels;
}

}  // namespace

void short_conv(const ComputeContext& ctx, std::span<const ShortConvArgs> sequences) {
  int64_t total = 0;
  for (const ShortConvArgs& s : sequences) {
    check_args(s);
    total += items_of(s);
  }
  // Items write disjoint channels of disjoint sequences: no reduction crosses them.
#pragma omp parallel for schedule(static) num_threads(ctx.n_threads) if (ctx.n_threads > 1 && total > 1)
  for (int64_t item = 0; item < total; ++item) {
    int64_t rest = item;
    size_t s = 0;
    while (rest >= items_of(sequences[s])) rest -= items_of(sequences[s++]);
    short_conv_range(sequences[s], rest * kShortConvItemChannels);
  }
}

void short_conv_reference(const ShortConvArgs& a) {
  check_args(a);
  const int K = a.kernel_size;
  const int64_t C = a.channels;
  for (int64_t c = 0; c < C; ++c) {
    // The channel's whole stream of B * x: the history first, then the new positions.
    std::vector<double> stream;
    for (int k = 0; k + 1 < K; ++k) stream.push_back(a.history[k * C + c]);
    for (int64_t t = 0; t < a.length; ++t) {
      const float* row = a.bcx + t * a.ldbcx;
      stream.push_back(static_cast<double>(row[c]) * static_cast<double>(row[2 * C + c]));
    }
    for (int64_t t = 0; t < a.length; ++t) {
      double acc = 0.0;
      for (int k = 0; k < K; ++k) acc += static_cast<double>(a.weight[k * C + c]) * stream[t + k];
      a.y[t * a.ldy + c] = static_cast<float>(static_cast<double>(a.bcx[t * a.ldbcx + C + c]) * acc);
    }
    for (int k = 0; k + 1 < K; ++k)
      a.history[k * C + c] = static_cast<float>(stream[static_cast<size_t>(a.length + k)]);
  }
}

}  // namespace mb

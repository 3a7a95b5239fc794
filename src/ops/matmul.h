// SPDX-License-Identifier: MIT
// Matrix product against a weight matrix packed in column panels.
//
//   y[m, n] = sum_k x[m, k] * W[n, k]  (+ bias[n])  (+ y[m, n] when accumulating)
//   or y[m, n] = softplus(sum_k x[m, k] * W[n, k] + bias[n])  (Mamba-1's dt: fused, so the
//   activation is applied while the tile is in registers instead of in a pass over memory)
//
// The checkpoint stores W output-major [N, K]. At load it is packed once (in its storage dtype:
// f32, bf16 or f16) into panels of kPanelWidth outputs, [ceil(N / 64)][K][64]: for each k the 64
// weights of a panel are contiguous, so the kernel broadcasts x[m, k] against them (an outer
// product, no horizontal sums) and a decode step streams each panel front to back.
//
// The accumulation order of every output element is one chain:
//   acc = 0;  acc = fma(x[m, k], W[n, k], acc) for k = 0 .. K-1;  acc = acc + bias[n];  y = y + acc
// It depends only on K: not on M, the tile a row lands in, the thread count or the instruction
// set. That is what makes a decode step (M = 1) bit-identical to the same row of a prefill GEMM.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/dtype.h"
#include "core/threading.h"

namespace mb {

inline constexpr int64_t kPanelWidth = 64;

// A packed weight matrix (see above); `data` holds panels() * cols * 64 elements of `dtype`,
// rows past `rows` in the last panel are zero. In bf16 panels each pair of 16-output vectors is
// stored interleaved element by element, which lets the kernels widen 32 weights at once.
struct WeightMatrix {
  const void* data = nullptr;
  DType dtype = DType::F32;
  int64_t rows = 0;  // N, outputs
  int64_t cols = 0;  // K, inputs
  int64_t panels() const { return (rows + kPanelWidth - 1) / kPanelWidth; }
};

// Packs a row-major [rows, cols] matrix stored in `source_dtype` into panels stored in
// `target_dtype` (rounded to nearest even when narrowing). `source` may be unaligned.
std::vector<uint8_t> pack_weights(const void* source, DType source_dtype, int64_t rows, int64_t cols,
                                  DType target_dtype);
// W[n, k] of a packed matrix, widened to f32.
float packed_weight(const WeightMatrix& w, int64_t n, int64_t k);
// Bytes of w's packed panels, the zero rows of its last panel included: what one product with a
// single input row streams from memory (the size pack_weights returns for w's shape and dtype).
size_t packed_bytes(const WeightMatrix& w);

// Outputs [first, first + count) of a packed matrix as a matrix of their own: the same bytes (a
// run of whole panels), for running parts of one product as separate items. `first` is a multiple
// of kPanelWidth (which is whole quantized panels too); `count` is clipped to w.rows.
WeightMatrix output_range(const WeightMatrix& w, int64_t first, int64_t count);

struct MatmulArgs {
  const float* x = nullptr;  // [m, ldx], the first w.cols columns are read
  int64_t ldx = 0;
  int64_t m = 0;
  WeightMatrix w;
  const float* bias = nullptr;  // [w.rows] or null
  float* y = nullptr;           // [m, ldy], the first w.rows columns are written
  int64_t ldy = 0;
  bool accumulate = false;  // y += result instead of y = result
  bool softplus = false;    // y = softplus(result), after the bias (not with accumulate)
};

void matmul(const ComputeContext& ctx, const MatmulArgs& args);

// Plain double-precision reference (tests only compare against it).
void matmul_reference(const MatmulArgs& args);

}  // namespace mb

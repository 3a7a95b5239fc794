// Matrix product against a weight matrix in the checkpoint's own layout.
//
//   y[m, n] = sum_k x[m, k] * W[n, k]  (+ bias[n])  (+ y[m, n] when accumulating)
//
// W is output-major [N, K] (the PyTorch/safetensors layout), stored in f32, bf16 or f16 and
// widened in registers. The accumulation order of every output element is fixed and depends
// only on K: sixteen lanes, lane l summing k = l, l+16, l+32, ... with fused multiply-adds in
// increasing k, then the fixed tree of vec16.h, then the bias, then the accumulate. It does not
// depend on M, the tile a row lands in, the thread count or the instruction set, which is what
// makes a decode step (M = 1) bit-identical to the same row inside a prefill GEMM.
#pragma once

#include <cstdint>

#include "core/dtype.h"
#include "core/threading.h"

namespace mb {

struct WeightMatrix {
  const void* data = nullptr;  // [rows, cols] row-major in `dtype`
  DType dtype = DType::F32;
  int64_t rows = 0;            // N, outputs
  int64_t cols = 0;            // K, inputs
};

struct MatmulArgs {
  const float* x = nullptr;  // [m, ldx], the first w.cols columns are read
  int64_t ldx = 0;
  int64_t m = 0;
  WeightMatrix w;
  const float* bias = nullptr;  // [w.rows] or null
  float* y = nullptr;           // [m, ldy], the first w.rows columns are written
  int64_t ldy = 0;
  bool accumulate = false;      // y += result instead of y = result
};

void matmul(const ComputeContext& ctx, const MatmulArgs& args);

// Plain double-precision reference (tests only compare against it).
void matmul_reference(const MatmulArgs& args);

}  // namespace mb

// Per-instruction-set kernels of the quantized matmul (arithmetic in ops/quant_matmul.h).
//
// quant_kernels.inc is written once against Vec16 (vec16.h) plus a small integer contract that
// ivec16_avx512.h (VNNI), ivec16_avx2.h, ivec16_neon.h and ivec16_scalar.h each define in their
// namespace:
//   I32x16: sixteen int32 lanes; i32_zero, i32_set1, i32_load, i32_add, i32_sub, i32_mul (low 32
//   bits), i32_to_f32 (round to nearest even);
//   i32_load_u8 (sixteen bytes widened), i32_and, i32_or, i32_shr<N> (logical), i32_shl<N>;
//   W64: 64 weight bytes, four per lane; load_w64, w64_low_nibbles, w64_high_nibbles (each
//   byte's low or high four bits); store_i8 (sixteen integral floats in [-127, 127] as int8);
//   dot4(acc, w, x4): lane l += sum over i < 4 of w[4l + i] (unsigned) * byte i of x4 (signed),
//   exact; kDot4FullRange says whether weight bytes may exceed 127 (AVX2's vpmaddubsw saturates
//   beyond), and kQuantRows is the register tile's row count.
// Integer sums are exact in any order, so the instruction sets differ only in speed.
#pragma once

#include <cstdint>

#include "core/threading.h"
#include "ops/matmul.h"

namespace mb::cpu {

// A batch of activation rows quantized by quantize_activations (ops/quant_matmul.h).
struct QuantActivations {
  const int8_t* q = nullptr;        // [m, k]
  const float* scales = nullptr;    // [m, k / block]
  const int32_t* sums16 = nullptr;  // [m, k / 16]
  int64_t k = 0, block = 0;
};

struct QuantKernelTable {
  void (*matmul)(const MatmulArgs& args, const QuantActivations& x, int n_threads);
  // quantize_activations of ops/quant_matmul.h, bit for bit.
  void (*quantize)(const float* x, int64_t k, int64_t block, int8_t* q, float* scales, int32_t* sums16);
};

const QuantKernelTable& quant_kernels_scalar();
const QuantKernelTable& quant_kernels_avx2();
const QuantKernelTable& quant_kernels_avx512();  // needs AVX-512 VNNI
const QuantKernelTable& quant_kernels_neon();

// The product for a quantized args.w: quantizes the activation rows, then runs the kernel of
// ctx.isa (AVX-512 without VNNI runs the AVX2 kernel; all give the same bits).
void quant_matmul(const ComputeContext& ctx, const MatmulArgs& args);

}  // namespace mb::cpu

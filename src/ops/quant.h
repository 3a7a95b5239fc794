// SPDX-License-Identifier: MIT
// GGML's block-quantized weight formats: layouts, reference quantizers and dequantizers.
//
// The byte layouts are GGML's (ggml-common.h), so a block written here is a block llama.cpp
// reads and the other way round. Every scale is an IEEE half (f16), little-endian.
//
//   Q8_0 (32 weights, 34 bytes): f16 d, int8 qs[32];                 w[j] = qs[j] * d
//   Q4_0 (32 weights, 18 bytes): f16 d, uint8 qs[16];                w[j] = (nibble_j - 8) * d
//        byte j holds weight j in its low nibble and weight j + 16 in its high nibble.
//   Q4_K (256 weights, 144 bytes): f16 d, f16 dmin, uint8 scales[12], uint8 qs[128]
//        eight sub-blocks of 32, each with a 6-bit scale sc and 6-bit min m (packed below);
//        w = (d * sc) * q - (dmin * m), q a nibble. qs holds four 32-byte groups; group g
//        covers weights 64g .. 64g + 63: low nibbles the first 32 (sub-block 2g), high nibbles
//        the next 32 (sub-block 2g + 1).
//        scales[12]: for j < 4, sc_j = scales[j] & 63 and m_j = scales[j + 4] & 63; for j >= 4,
//        sc_j = (scales[j + 4] & 15) | (scales[j - 4] >> 6) << 4 and
//        m_j = (scales[j + 4] >> 4) | (scales[j] >> 6) << 4.
//   Q6_K (256 weights, 210 bytes): uint8 ql[128], uint8 qh[64], int8 scales[16], f16 d
//        sixteen sub-blocks of 16 with an int8 scale each; w = (d * scale) * (q - 32), q 6 bits.
//        Two halves of 128 weights; in half h (ql + 64h, qh + 32h), for l < 32:
//          q(l)      = (ql[l] & 15)      | ((qh[l] >> 0) & 3) << 4
//          q(l + 32) = (ql[l + 32] & 15) | ((qh[l] >> 2) & 3) << 4
//          q(l + 64) = (ql[l] >> 4)      | ((qh[l] >> 4) & 3) << 4
//          q(l + 96) = (ql[l + 32] >> 4) | ((qh[l] >> 6) & 3) << 4
//
// dequantize_row gives exactly the floats GGML's dequantize_row_* gives: the same operations in
// the same order, each rounded once (this project builds with -ffp-contract=off, like GGML's
// reference code on x86-64, whose base library is built without FMA instructions).
//
// quantize_row_reference follows GGML's reference quantizers (quantize_row_*_ref), the ones
// llama.cpp's `quantize` uses when no importance matrix is given, operation for operation, so it
// writes the same bytes: Q8_0 and Q4_0 are a max-abs scale and rounding; Q4_K searches a scale
// and min per sub-block (make_qkx2_quants) and Q6_K a scale per sub-block (make_qx_quants), then
// quantize the sub-block scales to 6 or 8 bits and requantize the weights against them.
// quantize_row writes the same bytes with the vector kernels of an instruction set
// (src/ops/cpu/quantize_kernels.inc): the searches run sixteen sub-blocks at once, one per lane,
// each lane doing the reference's operations in the reference's order.
#pragma once

#include <cstdint>

#include "core/dtype.h"
#include "core/threading.h"

namespace mb {

inline constexpr int64_t kQ8_0Block = 32;
inline constexpr int64_t kQ4_0Block = 32;
inline constexpr int64_t kQKBlock = 256;  // the K-quant super-block (GGML's QK_K)

struct BlockQ8_0 {
  uint16_t d;     // f16 scale
  int8_t qs[32];  // weights / d
};
struct BlockQ4_0 {
  uint16_t d;      // f16 scale
  uint8_t qs[16];  // nibbles, 8 = zero
};
struct BlockQ4_K {
  uint16_t d;          // f16 scale of the sub-block scales
  uint16_t dmin;       // f16 scale of the sub-block mins
  uint8_t scales[12];  // 6-bit scale and min of eight sub-blocks
  uint8_t qs[128];     // nibbles
};
struct BlockQ6_K {
  uint8_t ql[128];    // low four bits
  uint8_t qh[64];     // high two bits
  int8_t scales[16];  // sub-block scales
  uint16_t d;         // f16 scale of the sub-block scales
};
static_assert(sizeof(BlockQ8_0) == 34 && sizeof(BlockQ4_0) == 18 && sizeof(BlockQ4_K) == 144 &&
              sizeof(BlockQ6_K) == 210);

// Quantizes n floats (n a multiple of dtype_block_weights(type); throws mb::Error otherwise)
// into dtype_row_bytes(type, n) bytes at `out`. Float dtypes are stored as their elements (bf16
// and f16 rounded to nearest even). `out` may be unaligned. Blocks are independent, so rows
// stored one after another may be quantized as one long row. `isa` picks the kernels (a speed
// choice only: every instruction set writes the bytes of quantize_row_reference; throws
// mb::Error for one this CPU lacks).
void quantize_row(DType type, const float* x, int64_t n, void* out, Isa isa = best_isa());

// `rows` rows of `cols` values stored in `source_dtype` (any dtype; quantized rows are
// dequantized first), one after another, quantized into the quantized dtype `target` at `out`
// (rows * dtype_row_bytes(target, cols) bytes), with ctx's instruction set and threads: each
// thread takes whole chunks of rows, so the bytes are those of quantize_row_reference row by row
// for every thread count.
void quantize_rows(const ComputeContext& ctx, const void* source, DType source_dtype, int64_t rows,
                   int64_t cols, DType target, void* out);

// The same bytes from the plain reference code: the definition the kernels are tested against.
void quantize_row_reference(DType type, const float* x, int64_t n, void* out);

// One block of the quantized dtype `type` by the reference code (the kernels' way out for a block
// holding a NaN or an infinity, whose bytes they leave to the definition).
void quantize_block_reference(DType type, const float* x, void* out);

// The inverse: n floats from a row stored in `type` (any dtype; `blocks` may be unaligned).
void dequantize_row(DType type, const void* blocks, int64_t n, float* out);

// The 6-bit scale and min of sub-block j (0..7) of a Q4_K block (see the layout above).
inline void q4_k_scale_min(int j, const uint8_t* scales, uint8_t& scale, uint8_t& min) {
  if (j < 4) {
    scale = scales[j] & 63;
    min = scales[j + 4] & 63;
  } else {
    scale = static_cast<uint8_t>((scales[j + 4] & 15) | ((scales[j - 4] >> 6) << 4));
    min = static_cast<uint8_t>((scales[j + 4] >> 4) | ((scales[j] >> 6) << 4));
  }
}

}  // namespace mb

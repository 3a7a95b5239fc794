// SPDX-License-Identifier: MIT
// Matrix products against block-quantized weights (Q8_0, Q4_0, Q4_K, Q6_K; formats in quant.h).
//
// They go through the ordinary `matmul` of matmul.h: a WeightMatrix whose dtype is quantized is
// packed by pack_weights (quantizing float rows) or pack_quantized (GGML blocks as stored in a
// file) into the layout below, and matmul dispatches on the dtype.
//
// Packed layout. Outputs are grouped in panels of kQuantPanel = 16 (one 16-lane vector); a panel
// holds, for each weight block b along K (32 weights for Q8_0/Q4_0, 256 for the K-quants), one
// tile of 16 * dtype_block_bytes bytes: exactly the bytes of the 16 GGML blocks, rearranged so
// that a tile unpacks with plain vector loads into [K-block / 4][16 outputs][4 weights] bytes,
// the operand of a four-way byte dot product per output lane. Tiles run panel by panel, block by
// block: tile (p, b) starts at (p * K / B + b) * tile bytes. Outputs past N in the last panel
// are zero. Per tile (lane l = output within the panel, c = chunk of 64 bytes, byte 4l + i):
//   Q8_0: f16 d[16] | chunk c < 8: qs[l][4c + i] + 128 (as unsigned bytes)
//   Q4_0: f16 d[16] | chunk c < 4: nibble of weight 4c + i (low) and of 16 + 4c + i (high)
//   Q4_K: f16 d[16] | f16 dmin[16] | uint8 scales[12][16] (byte j of lane l's GGML scales at 16j + l)
//         | chunk c < 32: nibble of weight 4c + i (low) and of 128 + 4c + i (high)
//   Q6_K: f16 d[16] | int8 scales[16 sub-blocks][16 lanes]
//         | chunk c < 32: low four bits of weight 4c + i (low nibble) and 128 + 4c + i (high)
//         | chunk h < 16: the high two bits of weight 4(h + 16j) + i in bits 2j, 2j + 1
//
// Activations are quantized per row, never per GEMM: blocks of 32 (for Q8_0/Q4_0 weights) or
// 256 (K-quants) of a row get one f32 scale dx = amax / 127 and int8 values
// q = round_to_even(x / dx) in [-127, 127] (quantize_activations below), so a row's quantized
// values do not depend on which rows share the product.
//
// Arithmetic, for output n and activation row m. Per weight block b the kernel forms exact
// int32 sums of byte products (any order gives the same integers), then, for each sub-block s
// of the block, with S_s = sum of (stored weight byte) * q over the sub-block and X_s = sum of q:
//   Q8_0: I = S - 128 X                       term = float(I) * (d * dx)
//   Q4_0: I = S - 8 X                         term = float(I) * (d * dx)
//   Q4_K: I = sum_s sc_s S_s, J = sum_s m_s X_s  (eight sub-blocks of 32)
//         term = float(I) * (d * dx) - float(J) * (dmin * dx)
//   Q6_K: I = sum_s sc_s (S_s - 32 X_s)       (sixteen sub-blocks of 16)
//         term = float(I) * (d * dx)
// and the output is one chain of f32 additions in block order:
//   acc = 0;  acc = acc + term_b for b = 0 .. K/B - 1;  acc = acc + bias[n];  then softplus or
//   y = y + acc, as for float weights (matmul.h).
// Each of these is a single IEEE operation (int32 to f32 rounds to nearest even), written out
// in the same order by every instruction set (AVX-512 VNNI, AVX2, NEON, scalar), so M, tiling,
// threads and the instruction set change no bit: a decode step equals the same row of a
// prefill GEMM. Each instruction set also quantizes the activations itself, in vectors, with
// quantize_activations' bits.
//
// Speed: for a block of up to kQuantRowBlock activation rows (four times that for the K-quants),
// a group of panels (two where registers allow) has its levels unpacked once; tiles of a few rows
// then run over every block of those panels with their output accumulators in registers (the
// K-quants in spans of K, every row tile through one span before the next, so the span's unpacked
// levels stay in L1), and prefill runs at GEMM speed rather than as M GEMVs. A single row (a
// decode step) reads Q8_0, Q4_0 and Q4_K levels (a load and a nibble mask) and the K-quant scales
// straight from the streaming tiles, so nothing is unpacked to memory on the way.
#pragma once

#include <cstdint>
#include <vector>

#include "core/dtype.h"
#include "ops/matmul.h"

namespace mb {

inline constexpr int64_t kQuantPanel = 16;
inline constexpr int64_t kQuantRowBlock = 64;

// Weights per activation block for a quantized weight dtype: 32 for Q8_0/Q4_0, 256 otherwise.
int64_t activation_block(DType weight_dtype);

// The dtype a [rows, cols] matrix is stored in when `wanted` is asked for. A quantized dtype
// needs cols to be a multiple of its block; otherwise a K-quant falls back to Q8_0 when cols is a
// multiple of 32, and anything else falls back to bf16 (Mamba-1's dt_proj, K = dt_rank, is the
// usual case). Float dtypes are returned unchanged.
DType storable_dtype(DType wanted, int64_t cols);

// Packs a row-major [rows, cols] matrix of GGML blocks of `type` (cols / block blocks per row,
// as a GGUF file stores it; may be unaligned) into the layout above. Throws mb::Error when
// cols is not a multiple of the block.
std::vector<uint8_t> pack_quantized(const void* blocks, DType type, int64_t rows, int64_t cols);

// Row n of a packed quantized matrix, dequantized exactly as dequantize_row would the original
// GGML blocks.
void dequantize_packed_row(const WeightMatrix& w, int64_t n, float* out);

// One activation row of k values quantized as described above: q [k], scales [k / block],
// sums16 [k / 16] (the sum of each 16 consecutive q). k must be a multiple of `block`.
void quantize_activations(const float* x, int64_t k, int64_t block, int8_t* q, float* scales,
                          int32_t* sums16);

}  // namespace mb

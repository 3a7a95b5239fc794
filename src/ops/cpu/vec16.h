// SPDX-License-Identifier: MIT
// The Vec16 contract shared by the CPU instruction-set targets, and the one kernel table each
// target exports.
//
// Each of vec16_avx512.h, vec16_avx2.h (x86-64), vec16_neon.h (AArch64) and vec16_scalar.h (every
// architecture) defines, in its own namespace, a
// sixteen-lane float vector `Vec16` with the same free functions: zero, set1, load, load_partial
// (lanes past n read as 0), store, store_partial, load_bf16(_partial), load_bf16_interleaved and
// load_bf16_even (the pairwise-interleaved bf16 panel layout of matmul), load_f16(_partial), add,
// sub, mul, div, fma, max, min (NaN rule of x86: return the second operand), round_even,
// scale_pow2 (p * 2^n, one rounding), frexp, less/equal/greater + select, and reduce_sum with one
// fixed tree
// ((l[i] + l[i+8]), then (+4), then (+2), then (+1)).
//
// Every one of them is a single correctly rounded IEEE operation per lane, so the same kernel
// text (the kernel families' .inc files, compiled once per target) yields the same bits on every
// target: the instruction set is a speed choice, never a numerics choice. That holds across
// machines too (tests/model/fingerprint_test.cc pins the bits), with one exception outside the
// contract: a NaN *created* by an invalid operation (inf - inf, 0 * inf) is 0xffc00000 on x86 and
// 0x7fc00000 on AArch64; a NaN that comes in passes through alike.
//
// The quantized matmul (quant_kernels.inc) is written against Vec16 plus a small integer contract
// that ivec16_avx512.h (VNNI), ivec16_avx2.h, ivec16_neon.h and ivec16_scalar.h each define in
// their namespace:
//   I32x16: sixteen int32 lanes; i32_zero, i32_set1, i32_load, i32_add, i32_sub, i32_mul (low 32
//   bits), i32_to_f32 (round to nearest even);
//   i32_load_u8 (sixteen bytes widened), i32_and, i32_or, i32_shr<N> (logical), i32_shl<N>;
//   f32_bits and bits_f32 (a float lane's bits as an int32 lane and back, unchanged);
//   W64: 64 weight bytes, four per lane; load_w64, w64_low_nibbles, w64_high_nibbles (each
//   byte's low or high four bits); store_i8 (sixteen integral floats in [-127, 127] as int8);
//   dot4(acc, w, x4): lane l += sum over i < 4 of w[4l + i] (unsigned) * byte i of x4 (signed),
//   exact; kDot4FullRange says whether weight bytes may exceed 127 (AVX2's vpmaddubsw saturates
//   beyond), and kQuantRows is the register tile's row count; i32_keep(acc) (no value change) asks
//   the compiler to keep a loop's accumulator in one register.
// Integer sums are exact in any order, so the instruction sets differ only in speed.
//
// Each target is one translation unit, cpu_<target>.cc, which includes every family's .inc once
// and exports its KernelTable (AVX-512's quantized kernels, built with VNNI, are a second one,
// cpu_avx512_vnni.cc); kernels.cc holds the one dispatcher, kernels_for, and the op entry points
// that call through it.
#pragma once

#include <cstdint>
#include <span>

#include "core/dtype.h"
#include "core/threading.h"
#include "ops/activations.h"
#include "ops/attention.h"
#include "ops/causal_conv.h"
#include "ops/ffn.h"
#include "ops/gated_delta_net.h"
#include "ops/gated_rms_norm.h"
#include "ops/mamba2_scan.h"
#include "ops/mamba3_scan.h"
#include "ops/matmul.h"
#include "ops/moe.h"
#include "ops/rms_norm.h"
#include "ops/rope.h"
#include "ops/selective_scan.h"

namespace mb::cpu {

// A batch of activation rows quantized by quantize_activations (ops/quant_matmul.h).
struct QuantActivations {
  const int8_t* q = nullptr;        // [m, k]
  const float* scales = nullptr;    // [m, k / block]
  const int32_t* sums16 = nullptr;  // [m, k / 16]
  int64_t k = 0, block = 0;
};

// The quantized matmul's kernels: a group of their own because on AVX-512 they come from
// another translation unit (cpu_avx512_vnni.cc) than the rest of the table.
struct QuantKernels {
  void (*matmul)(const MatmulArgs& args, const QuantActivations& x, int n_threads);
  // quantize_activations of ops/quant_matmul.h, bit for bit.
  void (*quantize)(const float* x, int64_t k, int64_t block, int8_t* q, float* scales, int32_t* sums16);
  // quantize_row of ops/quant.h for a quantized `type`: n_blocks blocks of weights, the bytes of
  // quantize_row_reference (quantize_kernels.inc).
  void (*quantize_weights)(DType type, const float* x, int64_t n_blocks, uint8_t* out);
};

// Every kernel family of one instruction set.
struct KernelTable {
  void (*matmul)(const MatmulArgs& args, int n_threads);
  void (*rms_norm)(const RmsNormArgs& args, int n_threads);
  void (*gated_rms_norm)(const GatedRmsNormArgs& args, int n_threads);
  void (*causal_conv_silu)(std::span<const CausalConvArgs> sequences, int n_threads);
  void (*selective_scan)(std::span<const SelectiveScanArgs> sequences, int n_threads);
  void (*mamba2_scan)(const Mamba2ScanParams& params, std::span<const Mamba2ScanSequence> sequences,
                      int n_threads);
  void (*mamba3_scan)(const Mamba3ScanParams& params, std::span<const Mamba3ScanSequence> sequences,
                      int n_threads);
  void (*gated_delta_net)(const GatedDeltaNetParams& params, std::span<const GatedDeltaNetSequence> sequences,
                          int n_threads);
  void (*attention)(const AttentionParams& params, std::span<const AttentionSequence> sequences,
                    int n_threads);
  void (*glu)(const GluArgs& args, int n_threads);
  void (*scale_rows)(const ScaleArgs& args, int n_threads);
  // ops/rope.h's rotation, in place, of the first `rot` channels of `rows` rows of `heads` heads
  // (head h at h * head_dim), row r by the factors at factors + r * rot (its cos factors, then its
  // sin factors).
  void (*rope_rotate)(float* x, int64_t ld, int64_t rows, int64_t heads, int64_t head_dim, int64_t rot,
                      const float* factors, int n_threads);
  // ops/moe.h's routing of m rows, and one expert's weighted outputs added to its rows' sums.
  void (*moe_route)(const MoeParams& params, const float* correction_bias, const float* logits,
                    int64_t ld_logits, int64_t m, float* routes, int64_t ld_routes, int n_threads);
  void (*moe_accumulate)(const float* out, int64_t ld_out, const int32_t* rows, const float* weights,
                         int64_t n, int64_t d, float* acc, int64_t ld_acc, int n_threads);
  QuantKernels quant;
  float (*exp1)(float x);
  float (*silu1)(float x);
  float (*softplus1)(float x);
};

// body(i) for i in [0, n), split statically over n_threads threads; run inline, without entering
// OpenMP, when one thread does it all. Products that run as items of another parallel region (the
// MoE op's experts) call the kernels with one thread, and there even an inactive nested parallel
// construct costs a team of its own and futex calls: about 10 % of a MoE model's decode step.
template <class Body>
void parallel_for(int n_threads, int64_t n, const Body& body) {
  if (n_threads > 1 && n > 1) {
#pragma omp parallel for schedule(static) num_threads(n_threads)
    for (int64_t i = 0; i < n; ++i) body(i);
  } else {
    for (int64_t i = 0; i < n; ++i) body(i);
  }
}

// The table of `isa`, or mb::Error when this CPU does not support it. Every other function
// below is one target's export for kernels_for to pick from.
const KernelTable& kernels_for(Isa isa);

const KernelTable& kernels_scalar();
const KernelTable& kernels_avx2();
// Its quant entries are empty: AVX-512's quantized kernels need VNNI (quant_kernels_avx512_vnni),
// which kernels_for checks for at run time.
const KernelTable& kernels_avx512();
const QuantKernels& quant_kernels_avx512_vnni();
const KernelTable& kernels_neon();

}  // namespace mb::cpu

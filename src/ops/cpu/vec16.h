// The Vec16 contract shared by the CPU instruction-set targets.
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
// text (kernels_generic.inc, compiled once per target) yields the same bits on every target:
// the instruction set is a speed choice, never a numerics choice. That holds across machines too
// (tests/model/fingerprint_test.cc pins the bits), with one exception outside the contract: a NaN
// *created* by an invalid operation (inf - inf, 0 * inf) is 0xffc00000 on x86 and 0x7fc00000 on
// AArch64; a NaN that comes in passes through alike.
#pragma once

#include <cstdint>

#include "core/dtype.h"
#include "ops/activations.h"
#include "ops/causal_conv.h"
#include "ops/gated_rms_norm.h"
#include "ops/matmul.h"
#include "ops/rms_norm.h"
#include "ops/selective_scan.h"

namespace mb::cpu {

// One table of kernels per instruction set; the dispatcher in kernels.cc picks one.
struct KernelTable {
  void (*matmul)(const MatmulArgs& args, int n_threads);
  void (*rms_norm)(const RmsNormArgs& args, int n_threads);
  void (*gated_rms_norm)(const GatedRmsNormArgs& args, int n_threads);
  void (*causal_conv_silu)(std::span<const CausalConvArgs> sequences, int n_threads);
  void (*selective_scan)(std::span<const SelectiveScanArgs> sequences, int n_threads);
  float (*exp1)(float x);
  float (*silu1)(float x);
  float (*softplus1)(float x);
};

const KernelTable& kernels_scalar();
const KernelTable& kernels_avx2();
const KernelTable& kernels_avx512();
const KernelTable& kernels_neon();
const KernelTable& kernels_for(Isa isa);

}  // namespace mb::cpu

// SPDX-License-Identifier: MIT
// The quantized-matmul kernels compiled for AVX-512 with VNNI (its byte dot products, vpdpbusd;
// the target region below names the AVX-512 set plus VNNI). Nothing else is built
// with VNNI, and kernels_for picks these only on a CPU that has it, so an AVX-512 CPU without
// VNNI never runs a VNNI instruction (it gets AVX2's quantized kernels, with the same bits).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "core/error.h"
#include "ops/cpu/vec16.h"
#include "ops/quant.h"
#include "ops/quant_matmul.h"

// Only the kernels below are built for this instruction set, by a target region rather than a
// whole-file flag: the standard-library templates they instantiate (a std::vector of parts,
// its growth) are inline functions every kernel file shares by name, and the linker keeps one
// copy of each, so a copy built for AVX-512 would run on a CPU without it.
#if defined(__clang__)
// clang 14 cannot outline an OpenMP region inside a target region, so under clang (the fuzzing
// build, whose harnesses run no kernels) CMakeLists.txt compiles this file with the flags instead.
#else
#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512dq,avx512vnni,avx2,fma,f16c")
#endif
#include "ops/cpu/ivec16_avx512.h"
#include "ops/cpu/vec16_avx512.h"

namespace mb::cpu_avx512 {
using cpu::QuantActivations;
using cpu::QuantKernels;

namespace quant {
#include "ops/cpu/quant_kernels.inc"
}  // namespace quant

namespace quantize {
#include "ops/cpu/quantize_kernels.inc"
}  // namespace quantize

constexpr QuantKernels kQuantVnni = {.matmul = quant::quant_matmul,
                                     .quantize = quant::quantize_row,
                                     .quantize_weights = quantize::quantize_weights};

}  // namespace mb::cpu_avx512

#if !defined(__clang__)
#pragma GCC pop_options
#endif

namespace mb::cpu {

const QuantKernels& quant_kernels_avx512_vnni() {
  return cpu_avx512::kQuantVnni;
}

}  // namespace mb::cpu

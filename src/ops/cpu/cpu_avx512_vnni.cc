// The quantized-matmul kernels compiled for AVX-512 with VNNI (its byte dot products, vpdpbusd;
// CMakeLists.txt gives this file the AVX-512 flags plus -mavx512vnni). Nothing else is built
// with VNNI, and kernels_for picks these only on a CPU that has it, so an AVX-512 CPU without
// VNNI never runs a VNNI instruction (it gets AVX2's quantized kernels, with the same bits).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "core/error.h"
#include "ops/cpu/ivec16_avx512.h"
#include "ops/cpu/vec16.h"
#include "ops/cpu/vec16_avx512.h"
#include "ops/quant.h"
#include "ops/quant_matmul.h"

namespace mb::cpu_avx512 {
using cpu::QuantActivations;
using cpu::QuantKernels;

namespace quant {
#include "ops/cpu/quant_kernels.inc"
}  // namespace quant

constexpr QuantKernels kQuantVnni = {.matmul = quant::quant_matmul, .quantize = quant::quantize_row};

}  // namespace mb::cpu_avx512

namespace mb::cpu {

const QuantKernels& quant_kernels_avx512_vnni() {
  return cpu_avx512::kQuantVnni;
}

}  // namespace mb::cpu

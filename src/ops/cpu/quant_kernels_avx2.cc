// The quantized-matmul kernels compiled for the avx2 target (see quant_kernels.inc).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "core/error.h"

#include "ops/cpu/ivec16_avx2.h"
#include "ops/cpu/quant_kernels.h"
#include "ops/cpu/vec16_avx2.h"
#include "ops/quant.h"
#include "ops/quant_matmul.h"

namespace mb::cpu_avx2 {
using cpu::QuantActivations;
using cpu::QuantKernelTable;
#include "ops/cpu/quant_kernels.inc"
}  // namespace mb::cpu_avx2

namespace mb::cpu {
const QuantKernelTable& quant_kernels_avx2() {
  return cpu_avx2::quant_table();
}
}  // namespace mb::cpu

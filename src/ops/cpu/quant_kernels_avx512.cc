// The quantized-matmul kernels compiled for the avx512 target (see quant_kernels.inc).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "core/error.h"

#include "ops/cpu/ivec16_avx512.h"
#include "ops/cpu/quant_kernels.h"
#include "ops/cpu/vec16_avx512.h"
#include "ops/quant.h"
#include "ops/quant_matmul.h"

namespace mb::cpu_avx512 {
using cpu::QuantActivations;
using cpu::QuantKernelTable;
#include "ops/cpu/quant_kernels.inc"
}  // namespace mb::cpu_avx512

namespace mb::cpu {
const QuantKernelTable& quant_kernels_avx512() {
  return cpu_avx512::quant_table();
}
}  // namespace mb::cpu

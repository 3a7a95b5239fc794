// The quantized-matmul kernels compiled for the neon target (see quant_kernels.inc).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "core/error.h"

#include "ops/cpu/ivec16_neon.h"
#include "ops/cpu/quant_kernels.h"
#include "ops/cpu/vec16_neon.h"
#include "ops/quant.h"
#include "ops/quant_matmul.h"

namespace mb::cpu_neon {
using cpu::QuantActivations;
using cpu::QuantKernelTable;
#include "ops/cpu/quant_kernels.inc"
}  // namespace mb::cpu_neon

namespace mb::cpu {
const QuantKernelTable& quant_kernels_neon() {
  return cpu_neon::quant_table();
}
}  // namespace mb::cpu

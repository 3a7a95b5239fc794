// The quantized-matmul kernels compiled for the scalar target (see quant_kernels.inc).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "core/error.h"

#include "ops/cpu/ivec16_scalar.h"
#include "ops/cpu/quant_kernels.h"
#include "ops/cpu/vec16_scalar.h"
#include "ops/quant.h"
#include "ops/quant_matmul.h"

namespace mb::cpu_scalar {
using cpu::QuantActivations;
using cpu::QuantKernelTable;
#include "ops/cpu/quant_kernels.inc"
}  // namespace mb::cpu_scalar

namespace mb::cpu {
const QuantKernelTable& quant_kernels_scalar() {
  return cpu_scalar::quant_table();
}
}  // namespace mb::cpu

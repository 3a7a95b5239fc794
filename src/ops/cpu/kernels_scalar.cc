// The generic CPU kernels compiled for the scalar target (see kernels_generic.inc).
#include <cmath>
#include <span>

#include "ops/cpu/vec16.h"
#include "ops/cpu/vec16_scalar.h"

namespace mb::cpu_scalar {
using cpu::KernelTable;
#include "ops/cpu/kernels_generic.inc"
}  // namespace mb::cpu_scalar

namespace mb::cpu {
const KernelTable& kernels_scalar() { return cpu_scalar::table(); }
}  // namespace mb::cpu

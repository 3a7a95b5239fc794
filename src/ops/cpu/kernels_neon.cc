// The generic CPU kernels compiled for the neon target (see kernels_generic.inc).
#include <cmath>
#include <span>

#include "ops/cpu/vec16.h"
#include "ops/cpu/vec16_neon.h"

namespace mb::cpu_neon {
using cpu::KernelTable;
#include "ops/cpu/kernels_generic.inc"
}  // namespace mb::cpu_neon

namespace mb::cpu {
const KernelTable& kernels_neon() {
  return cpu_neon::table();
}
}  // namespace mb::cpu

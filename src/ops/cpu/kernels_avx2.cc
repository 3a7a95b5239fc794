// The generic CPU kernels compiled for the avx2 target (see kernels_generic.inc).
#include <cmath>
#include <span>

#include "ops/cpu/vec16.h"
#include "ops/cpu/vec16_avx2.h"

namespace mb::cpu_avx2 {
using cpu::KernelTable;
#include "ops/cpu/kernels_generic.inc"
}  // namespace mb::cpu_avx2

namespace mb::cpu {
const KernelTable& kernels_avx2() { return cpu_avx2::table(); }
}  // namespace mb::cpu

// The generic CPU kernels compiled for the avx512 target (see kernels_generic.inc).
#include <cmath>
#include <span>

#include "ops/cpu/vec16.h"
#include "ops/cpu/vec16_avx512.h"

namespace mb::cpu_avx512 {
using cpu::KernelTable;
#include "ops/cpu/kernels_generic.inc"
}  // namespace mb::cpu_avx512

namespace mb::cpu {
const KernelTable& kernels_avx512() { return cpu_avx512::table(); }
}  // namespace mb::cpu

// The Mamba-3 scan kernels compiled for the neon target (see mamba3_kernels.inc).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <span>
#include <vector>

#include "core/error.h"
#include "ops/cpu/mamba3_kernels.h"
#include "ops/cpu/vec16.h"
#include "ops/cpu/vec16_neon.h"

namespace mb::cpu_neon {
#include "ops/cpu/mamba3_kernels.inc"
}  // namespace mb::cpu_neon

namespace mb::cpu {
void mamba3_scan_neon(const Mamba3ScanParams& params, std::span<const Mamba3ScanSequence> sequences,
                      int n_threads) {
  cpu_neon::mamba3_scan_all(params, sequences, n_threads);
}
}  // namespace mb::cpu

// The Mamba-2 scan kernels compiled for the neon target (see mamba2_kernels.inc).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <span>
#include <vector>

#include "core/error.h"
#include "ops/cpu/mamba2_kernels.h"
#include "ops/cpu/vec16.h"
#include "ops/cpu/vec16_neon.h"

namespace mb::cpu_neon {
#include "ops/cpu/mamba2_kernels.inc"
}  // namespace mb::cpu_neon

namespace mb::cpu {
void mamba2_scan_neon(const Mamba2ScanParams& params, std::span<const Mamba2ScanSequence> sequences,
                      int n_threads) {
  cpu_neon::mamba2_scan_all(params, sequences, n_threads);
}
}  // namespace mb::cpu

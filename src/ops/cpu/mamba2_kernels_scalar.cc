// The Mamba-2 scan kernels compiled for the scalar target (see mamba2_kernels.inc).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <span>
#include <vector>

#include "core/error.h"
#include "ops/cpu/mamba2_kernels.h"
#include "ops/cpu/vec16.h"
#include "ops/cpu/vec16_scalar.h"

namespace mb::cpu_scalar {
#include "ops/cpu/mamba2_kernels.inc"
}  // namespace mb::cpu_scalar

namespace mb::cpu {
void mamba2_scan_scalar(const Mamba2ScanParams& params, std::span<const Mamba2ScanSequence> sequences,
                        int n_threads) {
  cpu_scalar::mamba2_scan_all(params, sequences, n_threads);
}
}  // namespace mb::cpu

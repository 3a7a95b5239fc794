// The Mamba-3 scan kernels compiled for the scalar target (see mamba3_kernels.inc).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <span>
#include <vector>

#include "core/error.h"
#include "ops/cpu/mamba3_kernels.h"
#include "ops/cpu/vec16.h"
#include "ops/cpu/vec16_scalar.h"

namespace mb::cpu_scalar {
#include "ops/cpu/mamba3_kernels.inc"
}  // namespace mb::cpu_scalar

namespace mb::cpu {
void mamba3_scan_scalar(const Mamba3ScanParams& params, std::span<const Mamba3ScanSequence> sequences,
                        int n_threads) {
  cpu_scalar::mamba3_scan_all(params, sequences, n_threads);
}
}  // namespace mb::cpu

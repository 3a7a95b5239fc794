// The Mamba-3 scan kernels compiled for the avx2 target (see mamba3_kernels.inc).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <span>
#include <vector>

#include "core/error.h"
#include "ops/cpu/mamba3_kernels.h"
#include "ops/cpu/vec16.h"
#include "ops/cpu/vec16_avx2.h"

namespace mb::cpu_avx2 {
#include "ops/cpu/mamba3_kernels.inc"
}  // namespace mb::cpu_avx2

namespace mb::cpu {
void mamba3_scan_avx2(const Mamba3ScanParams& params, std::span<const Mamba3ScanSequence> sequences,
                      int n_threads) {
  cpu_avx2::mamba3_scan_all(params, sequences, n_threads);
}
}  // namespace mb::cpu

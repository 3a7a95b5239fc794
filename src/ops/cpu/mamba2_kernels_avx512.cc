// The Mamba-2 scan kernels compiled for the avx512 target (see mamba2_kernels.inc).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <span>
#include <vector>

#include "core/error.h"
#include "ops/cpu/mamba2_kernels.h"
#include "ops/cpu/vec16.h"
#include "ops/cpu/vec16_avx512.h"

namespace mb::cpu_avx512 {
#include "ops/cpu/mamba2_kernels.inc"
}  // namespace mb::cpu_avx512

namespace mb::cpu {
void mamba2_scan_avx512(const Mamba2ScanParams& params, std::span<const Mamba2ScanSequence> sequences,
                        int n_threads) {
  cpu_avx512::mamba2_scan_all(params, sequences, n_threads);
}
}  // namespace mb::cpu

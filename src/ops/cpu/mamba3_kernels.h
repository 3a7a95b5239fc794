// The per-instruction-set entry points of the Mamba-3 scan (mamba3_kernels.inc compiled once per
// instruction set of the target architecture); mamba3_kernels.cc picks one from the ComputeContext.
#pragma once

#include <span>

#include "ops/mamba3_scan.h"

namespace mb::cpu {

void mamba3_scan_avx512(const Mamba3ScanParams& params, std::span<const Mamba3ScanSequence> sequences,
                        int n_threads);
void mamba3_scan_avx2(const Mamba3ScanParams& params, std::span<const Mamba3ScanSequence> sequences,
                      int n_threads);
void mamba3_scan_neon(const Mamba3ScanParams& params, std::span<const Mamba3ScanSequence> sequences,
                      int n_threads);
void mamba3_scan_scalar(const Mamba3ScanParams& params, std::span<const Mamba3ScanSequence> sequences,
                        int n_threads);

}  // namespace mb::cpu

// The per-instruction-set entry points of the Mamba-2 scan (mamba2_kernels.inc compiled once per
// instruction set of the target architecture); mamba2_kernels.cc picks one from the ComputeContext.
#pragma once

#include <span>

#include "ops/mamba2_scan.h"

namespace mb::cpu {

void mamba2_scan_avx512(const Mamba2ScanParams& params, std::span<const Mamba2ScanSequence> sequences,
                        int n_threads);
void mamba2_scan_avx2(const Mamba2ScanParams& params, std::span<const Mamba2ScanSequence> sequences,
                      int n_threads);
void mamba2_scan_neon(const Mamba2ScanParams& params, std::span<const Mamba2ScanSequence> sequences,
                      int n_threads);
void mamba2_scan_scalar(const Mamba2ScanParams& params, std::span<const Mamba2ScanSequence> sequences,
                        int n_threads);

}  // namespace mb::cpu

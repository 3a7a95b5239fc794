// SPDX-License-Identifier: MIT
// The instruction set a --isa flag or the MB_ISA variable names, for benchmarks that measure
// another machine's kernels here (the AVX2 path on an AVX-512 CPU, say). Every set gives the
// same bits (src/ops/cpu/vec16.h), so the choice changes speed only.
#pragma once

#include <string_view>

#include "core/threading.h"

namespace mb {

// "auto" (best_isa()), "avx512", "avx2", "neon" or "scalar", any case. Throws mb::Error naming
// `what` for an unknown name or a set this CPU lacks (with the CPU's best in the message).
Isa parse_isa(std::string_view name, std::string_view what = "--isa");

}  // namespace mb

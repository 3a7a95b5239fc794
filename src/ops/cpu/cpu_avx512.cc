// SPDX-License-Identifier: MIT
// Every CPU kernel family but the quantized matmul, compiled for AVX-512 (F, BW, VL, DQ, with FMA
// and F16C; the target region below). The quantized kernels are built for
// VNNI, which some AVX-512 CPUs lack (Skylake-X), so they live in cpu_avx512_vnni.cc, the only
// file compiled with VNNI; kernels_for fills this table's quant entries at run time.
//
// Each family's .inc is included once, in a namespace of its own inside the target's, so the
// helpers that several families define under one name (kLanes, the scans' step_block and
// time_block, each family's copy of vec16_math.inc) never meet.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <span>
#include <vector>

#include "core/error.h"
#include "ops/cpu/vec16.h"

// Only the kernels below are built for this instruction set, by a target region rather than a
// whole-file flag: the standard-library templates they instantiate (a std::vector of parts,
// its growth) are inline functions every kernel file shares by name, and the linker keeps one
// copy of each, so a copy built for AVX-512 would run on a CPU without it.
#if defined(__clang__)
// clang 14 cannot outline an OpenMP region inside a target region, so under clang (the fuzzing
// build, whose harnesses run no kernels) CMakeLists.txt compiles this file with the flags instead.
#else
#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512dq,avx2,fma,f16c")
#endif
#include "ops/cpu/vec16_avx512.h"

namespace mb::cpu_avx512 {
using cpu::KernelTable;

namespace generic {
#include "ops/cpu/kernels_generic.inc"
}  // namespace generic

namespace mamba2 {
#include "ops/cpu/mamba2_kernels.inc"
}  // namespace mamba2

namespace mamba3 {
#include "ops/cpu/mamba3_kernels.inc"
}  // namespace mamba3

namespace gdn {
#include "ops/cpu/gdn_kernels.inc"
}  // namespace gdn

namespace hybrid {
#include "ops/cpu/hybrid_kernels.inc"
}  // namespace hybrid

namespace moe {
#include "ops/cpu/moe_kernels.inc"
}  // namespace moe

constexpr KernelTable kTable = {
    .matmul = generic::matmul,
    .rms_norm = generic::rms_norm,
    .gated_rms_norm = generic::gated_rms_norm,
    .causal_conv_silu = generic::causal_conv_silu,
    .selective_scan = generic::selective_scan,
    .mamba2_scan = mamba2::mamba2_scan_all,
    .mamba3_scan = mamba3::mamba3_scan_all,
    .gated_delta_net = gdn::gated_delta_net_all,
    .attention = hybrid::attention,
    .glu = hybrid::glu,
    .scale_rows = hybrid::scale_rows,
    .rope_rotate = hybrid::rope_rotate,
    .moe_route = moe::moe_route,
    .moe_accumulate = moe::moe_accumulate,
    .quant = {},
    .exp1 = generic::exp1,
    .silu1 = generic::silu1,
    .softplus1 = generic::softplus1,
};

}  // namespace mb::cpu_avx512

#if !defined(__clang__)
#pragma GCC pop_options
#endif

namespace mb::cpu {

const KernelTable& kernels_avx512() {
  return cpu_avx512::kTable;
}

}  // namespace mb::cpu

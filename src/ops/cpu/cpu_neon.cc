// SPDX-License-Identifier: MIT
// Every CPU kernel family compiled for AArch64 Advanced SIMD (NEON, part of base ARMv8-A, so no
// extra flags).
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
#include "ops/cpu/ivec16_neon.h"
#include "ops/cpu/vec16.h"
#include "ops/cpu/vec16_neon.h"
#include "ops/quant.h"
#include "ops/quant_matmul.h"

namespace mb::cpu_neon {
using cpu::KernelTable;
using cpu::QuantActivations;

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

namespace quant {
#include "ops/cpu/quant_kernels.inc"
}  // namespace quant

namespace quantize {
#include "ops/cpu/quantize_kernels.inc"
}  // namespace quantize

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
    .quant = {.matmul = quant::quant_matmul,
              .quantize = quant::quantize_row,
              .quantize_weights = quantize::quantize_weights},
    .exp1 = generic::exp1,
    .silu1 = generic::silu1,
    .softplus1 = generic::softplus1,
};

}  // namespace mb::cpu_neon

namespace mb::cpu {

const KernelTable& kernels_neon() {
  return cpu_neon::kTable;
}

}  // namespace mb::cpu

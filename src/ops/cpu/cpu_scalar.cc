// SPDX-License-Identifier: MIT
// Every CPU kernel family compiled for the scalar target: portable code for every architecture,
// and the kernels a ThreadSanitizer build runs (see best_isa()).
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
#include "ops/cpu/ivec16_scalar.h"
#include "ops/cpu/vec16.h"
#include "ops/cpu/vec16_scalar.h"
#include "ops/quant.h"
#include "ops/quant_matmul.h"

namespace mb::cpu_scalar {
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
// This target quantizes weights with the reference code itself: the vector kernels
// (quantize_kernels.inc) with their lanes emulated one by one are slower than it
// (bench/quantize_bench: 0.8x for Q4_K and Q6_K, 0.2x for Q8_0).
void quantize_weights(DType type, const float* x, int64_t n_blocks, uint8_t* out) {
  quantize_row_reference(type, x, n_blocks * dtype_block_weights(type), out);
}
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

}  // namespace mb::cpu_scalar

namespace mb::cpu {

const KernelTable& kernels_scalar() {
  return cpu_scalar::kTable;
}

}  // namespace mb::cpu

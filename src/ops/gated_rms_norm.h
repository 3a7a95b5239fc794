// SPDX-License-Identifier: MIT
// The gated RMSNorm of Mamba-2 (mamba_ssm RMSNormGated with norm_before_gate = false), per row:
//   v = y * silu(z);  each group of `group_size` channels: v * (1 / sqrt(mean(v^2) + eps)) * w
// Every group has its own mean square (a model with G > 1 groups normalizes G separate slices;
// normalizing the whole row instead is a known bug of some ports). The sum of squares uses the
// sixteen-lane order of rms_norm, so a row's result never depends on the other rows. Without a
// weight the op is the plain gate y * silu(z).
#pragma once

#include <cstdint>

#include "core/threading.h"

namespace mb {

struct GatedRmsNormArgs {
  const float* y = nullptr;  // [rows, ldy]
  int64_t ldy = 0;
  const float* z = nullptr;  // [rows, ldz] gate inputs
  int64_t ldz = 0;
  int64_t rows = 0;
  int64_t dim = 0;                // channels per row
  int64_t group_size = 0;         // divides dim
  const float* weight = nullptr;  // [dim], or null for the gate alone
  float eps = 1e-5f;
  float* out = nullptr;  // [rows, ldout]; may alias y when ldout == ldy
  int64_t ldout = 0;
};

void gated_rms_norm(const ComputeContext& ctx, const GatedRmsNormArgs& args);
void gated_rms_norm_reference(const GatedRmsNormArgs& args);

}  // namespace mb

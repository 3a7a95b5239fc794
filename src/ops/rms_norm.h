// SPDX-License-Identifier: MIT
// RMSNorm over rows: y = x * (1 / sqrt(mean(x^2) + eps)) * weight.
//
// The sum of squares uses the sixteen-lane order of matmul.h, so the result of a row never
// depends on which other rows are normalized with it.
#pragma once

#include <cstdint>

#include "core/threading.h"

namespace mb {

struct RmsNormArgs {
  const float* x = nullptr;  // [rows, ldx]
  int64_t ldx = 0;
  int64_t rows = 0;
  int64_t dim = 0;
  const float* weight = nullptr;  // [dim]
  float eps = 1e-5f;
  float* y = nullptr;  // [rows, ldy]; may alias x when ldy == ldx
  int64_t ldy = 0;
};

void rms_norm(const ComputeContext& ctx, const RmsNormArgs& args);
void rms_norm_reference(const RmsNormArgs& args);

}  // namespace mb

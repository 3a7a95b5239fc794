// SPDX-License-Identifier: MIT
// The element-wise ops of the hybrids' feed-forward layers and scalar multipliers.
//
// glu: the activation between an MLP's two products, per row:
//   SwiGlu:      x = gate [width] | up [width] (one fused product),  y = silu(gate) * up
//   ReluSquared: x = [width],                                         y = max(x, 0)^2
//   GeluErf:     x = gate [width] | up [width] (Zamba2's MLP),         y = gelu(gate) * up, with
//                the exact (erf) GELU, 0.5 g (1 + erf(g / sqrt 2)), as torch's default
//   SigmoidGlu:  x = gate [width] | up [width] (Qwen3.5's attention output gate),
//                y = up * sigmoid(gate), sigmoid(g) = 1 / (1 + exp(-g))
// scale_rows: y = x * scale, or y + x * scale with accumulate (two roundings, as the reference
// models compute a scaled residual branch `residual + branch * multiplier`; never an fma).
// Each element is one fixed sequence of f32 operations (silu is the engine's, ops/activations.h),
// so a row's result never depends on the other rows, the thread count or the instruction set.
#pragma once

#include <cstdint>

#include "core/threading.h"

namespace mb {

enum class Activation { SwiGlu, ReluSquared, GeluErf, SigmoidGlu };
const char* activation_name(Activation activation);
// Whether x holds gate | up (2 x width per row) rather than width.
inline bool gated_activation(Activation activation) {
  return activation != Activation::ReluSquared;
}

struct GluArgs {
  const float* x = nullptr;  // [rows, ldx]: 2 x width (gated) or width floats per row
  int64_t ldx = 0;
  int64_t rows = 0;
  int64_t width = 0;
  Activation activation = Activation::SwiGlu;
  float* y = nullptr;  // [rows, ldy]: width floats per row; may alias x when ldy == ldx
  int64_t ldy = 0;
};

struct ScaleArgs {
  const float* x = nullptr;  // [rows, ldx]
  int64_t ldx = 0;
  int64_t rows = 0;
  int64_t cols = 0;
  float scale = 1.0f;
  bool accumulate = false;  // y += x * scale, else y = x * scale
  float* y = nullptr;       // [rows, ldy]; may alias x
  int64_t ldy = 0;
};

void glu(const ComputeContext& ctx, const GluArgs& args);
void scale_rows(const ComputeContext& ctx, const ScaleArgs& args);
// Plain double-precision references (tests only).
void glu_reference(const GluArgs& args);
void scale_rows_reference(const ScaleArgs& args);

}  // namespace mb

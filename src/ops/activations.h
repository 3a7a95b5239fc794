// SPDX-License-Identifier: MIT
// Element-wise activations and the exp/log they are built from.
//
// All are computed by one polynomial algorithm (Cephes-style exp and log, see
// src/ops/cpu/vec16_math.inc) in every instruction set, so a value never depends on
// whether it was computed in a vector body, a tail, or by the scalar fallback.
#pragma once

#include <cstdint>

#include "core/threading.h"

namespace mb {

// The scalar entry points of the same algorithms, for code that needs single values.
float exp_f32(float x);
float silu_f32(float x);
float softplus_f32(float x);

}  // namespace mb

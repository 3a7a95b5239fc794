#version 450
// SPDX-License-Identifier: MIT
// The quantized GEMV of quant_matmul.glsl, its quads exchanging through subgroup shuffles.
#define MB_SUBGROUP 1
#include "quant_matmul.glsl"

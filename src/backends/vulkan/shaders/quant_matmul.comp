#version 450
// SPDX-License-Identifier: MIT
// The quantized GEMV of quant_matmul.glsl, its quads exchanging through shared memory.
#include "quant_matmul.glsl"

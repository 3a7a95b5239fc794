#version 450
// The quantized GEMV of quant_matmul.glsl, its quads exchanging through shared memory.
#include "quant_matmul.glsl"

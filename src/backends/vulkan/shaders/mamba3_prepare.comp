#version 450
// The per-row preparation of mamba3_prepare.glsl, its sum tree through shared memory.
#include "mamba3_prepare.glsl"

#version 450
// SPDX-License-Identifier: MIT
// The per-row preparation of mamba3_prepare.glsl, its sum tree through shared memory.
#include "mamba3_prepare.glsl"

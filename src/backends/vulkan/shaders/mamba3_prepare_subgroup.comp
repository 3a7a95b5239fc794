#version 450
// SPDX-License-Identifier: MIT
// The per-row preparation of mamba3_prepare.glsl, its sum tree with subgroup shuffles.
#define MB_SUBGROUP 1
#include "mamba3_prepare.glsl"

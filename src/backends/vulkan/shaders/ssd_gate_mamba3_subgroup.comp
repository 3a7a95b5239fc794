#version 450
// SPDX-License-Identifier: MIT
// The output gate of ssd_gate_mamba3.glsl, its sum tree with subgroup shuffles.
#define MB_SUBGROUP 1
#include "ssd_gate_mamba3.glsl"

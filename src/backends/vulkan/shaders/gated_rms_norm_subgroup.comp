#version 450
// SPDX-License-Identifier: MIT
// The gated RMSNorm of gated_rms_norm.glsl, its sum tree with subgroup shuffles.
#define MB_SUBGROUP 1
#include "gated_rms_norm.glsl"

#version 450
// SPDX-License-Identifier: MIT
// The gated RMSNorm of gated_rms_norm.glsl, its sum tree through shared memory.
#include "gated_rms_norm.glsl"

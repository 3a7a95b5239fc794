#version 450
// The gated RMSNorm of gated_rms_norm.glsl, its sum tree through shared memory.
#include "gated_rms_norm.glsl"

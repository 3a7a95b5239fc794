#version 450
// SPDX-License-Identifier: MIT
// The RoPE phases of mamba3_angles.glsl, one part per dispatch (for devices without
// shaderStorageBufferArrayDynamicIndexing).
#define MB_MAX_PARTS 1
#include "mamba3_angles.glsl"

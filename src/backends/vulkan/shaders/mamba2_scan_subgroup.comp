#version 450
// SPDX-License-Identifier: MIT
// The sequential Mamba-2 scan of mamba2_scan.glsl, one part per dispatch (for devices
// without shaderStorageBufferArrayDynamicIndexing), exchanging values by subgroup shuffles.
#define MB_MAX_PARTS 1
#define MB_SUBGROUP 1
#include "mamba2_scan.glsl"

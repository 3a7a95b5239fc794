#version 450
// SPDX-License-Identifier: MIT
// The state passing of ssd_pass.glsl, one part per dispatch (for devices without
// shaderStorageBufferArrayDynamicIndexing).
#define MB_MAX_PARTS 1
#include "ssd_pass.glsl"

#version 450
// SPDX-License-Identifier: MIT
// The selective scan of selective_scan.glsl, one part per dispatch: for devices without
// shaderStorageBufferArrayDynamicIndexing.
#define MB_MAX_PARTS 1
#include "selective_scan.glsl"

#version 450
// SPDX-License-Identifier: MIT
// The causal conv of causal_conv.glsl, one part per dispatch: for devices without
// shaderStorageBufferArrayDynamicIndexing.
#define MB_MAX_PARTS 1
#include "causal_conv.glsl"

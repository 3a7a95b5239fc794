#version 450
// SPDX-License-Identifier: MIT
// The causal conv of causal_conv.glsl over up to 16 parts per dispatch (kMaxParts in
// src/backends/vulkan/vulkan_ops.cc), each with its own history buffer.
#define MB_MAX_PARTS 16
#include "causal_conv.glsl"

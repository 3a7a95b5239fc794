#version 450
// SPDX-License-Identifier: MIT
// The selective scan of selective_scan.glsl (dt_proj optionally fused) over up to 16 parts per
// dispatch (kMaxGpuParts in src/backends/vulkan/vulkan_ops.h), each with its own state buffer.
#define MB_MAX_PARTS 16
#include "selective_scan.glsl"

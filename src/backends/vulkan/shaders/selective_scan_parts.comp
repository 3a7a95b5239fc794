#version 450
// The selective scan of selective_scan.glsl over up to 16 parts per dispatch (kMaxParts in
// src/backends/vulkan/vulkan_ops.cc), each with its own state buffer.
#define MB_MAX_PARTS 16
#include "selective_scan.glsl"

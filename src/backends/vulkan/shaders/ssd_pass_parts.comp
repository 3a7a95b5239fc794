#version 450
// SPDX-License-Identifier: MIT
// The state passing of ssd_pass.glsl over up to 16 parts per dispatch (kMaxGpuParts), each with
// its own state buffer.
#define MB_MAX_PARTS 16
#include "ssd_pass.glsl"

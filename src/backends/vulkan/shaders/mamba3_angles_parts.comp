#version 450
// SPDX-License-Identifier: MIT
// The RoPE phases of mamba3_angles.glsl over up to 16 parts per dispatch (kMaxGpuParts), each
// with its own state buffer.
#define MB_MAX_PARTS 16
#include "mamba3_angles.glsl"

#version 450
// SPDX-License-Identifier: MIT
// The sequential Mamba-3 mixer of mamba3_scan.glsl, up to 16 parts per dispatch (kMaxGpuParts),
// each with its own state buffer, exchanging values through shared memory.
#define MB_MAX_PARTS 16
#include "mamba3_scan.glsl"

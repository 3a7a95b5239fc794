#version 450
// SPDX-License-Identifier: MIT
// The chunk inputs of Mamba-3's SSD form of ssd_prep_mamba3.glsl, its sum tree with subgroup
// shuffles.
#define MB_SUBGROUP 1
#include "ssd_prep_mamba3.glsl"

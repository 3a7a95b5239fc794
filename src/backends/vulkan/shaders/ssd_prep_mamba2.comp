#version 450
// SPDX-License-Identifier: MIT
// The chunk inputs of Mamba-2's SSD form of ssd_prep_mamba2.glsl, its sum tree through shared
// memory.
#include "ssd_prep_mamba2.glsl"

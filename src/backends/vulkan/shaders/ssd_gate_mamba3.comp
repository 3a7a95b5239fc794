#version 450
// SPDX-License-Identifier: MIT
// The output gate of ssd_gate_mamba3.glsl, its sum tree through shared memory.
#include "ssd_gate_mamba3.glsl"

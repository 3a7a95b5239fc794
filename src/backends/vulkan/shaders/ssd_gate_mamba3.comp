#version 450
// The output gate of ssd_gate_mamba3.glsl, its sum tree through shared memory.
#include "ssd_gate_mamba3.glsl"

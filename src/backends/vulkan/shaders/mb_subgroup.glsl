// SPDX-License-Identifier: MIT
// The subgroup extensions of shaders built with MB_SUBGROUP (see mb_lanes.glsl). Extension
// directives must precede every declaration, so a shader includes this file first.
#ifndef MB_SUBGROUP_GLSL
#define MB_SUBGROUP_GLSL
#ifdef MB_SUBGROUP
#extension GL_KHR_shader_subgroup_basic : enable
#extension GL_KHR_shader_subgroup_shuffle : enable
#extension GL_KHR_shader_subgroup_shuffle_relative : enable
#endif
#endif

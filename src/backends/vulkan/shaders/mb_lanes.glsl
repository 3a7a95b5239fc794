// SPDX-License-Identifier: MIT
// Cooperation between the invocations of a workgroup, with the CPU's bits whatever the subgroup
// size: the sixteen-lane sum tree of the CPU's reductions, and the hand-off of a partial sum from
// one invocation to the next (the scans' pipelined fma chains).
//
// A shader that includes this file includes mb_subgroup.glsl first (before any declaration),
// defines kInvocations (its workgroup size, a multiple of 64) and, built with MB_SUBGROUP, may use subgroup shuffles (the device offers them in compute
// shaders: VK_SUBGROUP_FEATURE_SHUFFLE_BIT and _RELATIVE_BIT). Every function here holds
// barriers or subgroup operations, so every invocation of the workgroup must call it, in uniform
// control flow.
//
// mb_lanes_begin() numbers the invocations 0..kInvocations-1 ("linear") so that each subgroup
// holds a run of consecutive numbers; runs of 16 (the CPU's lanes) and of any power of two up to
// the subgroup size then lie inside one subgroup. Shuffles serve the steps whose partner lies in
// the same subgroup (all of them with subgroups of 16 or more: NVIDIA 32, AMD 32 or 64); the
// others pass through shared memory (lavapipe's subgroups of 8 take the first step of the
// sixteen-lane tree that way). Without MB_SUBGROUP, or where the subgroups do not tile the
// workgroup, every step goes through shared memory. Each path adds the same operands: IEEE
// addition is commutative, so either partner's sum has the same bits.
#ifndef MB_LANES_GLSL
#define MB_LANES_GLSL

#include "mb_subgroup.glsl"

shared float mb_lane_exchange[2 * kInvocations];

uint mb_linear = 0u;             // this invocation's number
uint mb_shuffle_width = 1u;      // partners closer than this (in mb_linear) are reached by shuffles
uint mb_exchange_parity = 0u;    // alternates the half of mb_lane_exchange each exchange writes

void mb_lanes_begin() {
  mb_linear = gl_LocalInvocationIndex;
  mb_shuffle_width = 1u;
#ifdef MB_SUBGROUP
  if (gl_NumSubgroups * gl_SubgroupSize == kInvocations) {
    mb_linear = gl_SubgroupID * gl_SubgroupSize + gl_SubgroupInvocationID;
    mb_shuffle_width = gl_SubgroupSize;
  }
#endif
}

// The value `v` of invocation mb_linear ^ distance (distance a power of two below 16 or the
// subgroup size), through a shuffle or shared memory.
float mb_partner(float v, uint distance) {
#ifdef MB_SUBGROUP
  if (distance < mb_shuffle_width) return subgroupShuffleXor(v, distance);
#endif
  const uint half_at = mb_exchange_parity * kInvocations;
  mb_exchange_parity ^= 1u;
  mb_lane_exchange[half_at + mb_linear] = v;
  barrier();
  // The other half is written next; the barrier of that exchange orders it after this read.
  return mb_lane_exchange[half_at + (mb_linear ^ distance)];
}

// reduce_sum's fixed tree over the sixteen invocations 16c..16c+15 (in mb_linear) holding lane
// values l[0..15]: (l[i] + l[i+8]), then +4, +2, +1. Every invocation of the sixteen returns the
// total.
float mb_tree16(float v) {
  precise float sum = v;
  for (uint distance = 8u; distance >= 1u; distance /= 2u) {
    const float other = mb_partner(sum, distance);
    sum = sum + other;
  }
  return sum;
}

// The value `v` of invocation mb_linear - 1 (any value for mb_linear 0), for chains handed on
// along runs of `run` invocations (a power of two) that start at multiples of `run`; the first of
// each run gets an unspecified value.
float mb_from_previous(float v, uint run) {
#ifdef MB_SUBGROUP
  if (run <= mb_shuffle_width) return subgroupShuffleUp(v, 1u);
#endif
  const uint half_at = mb_exchange_parity * kInvocations;
  mb_exchange_parity ^= 1u;
  mb_lane_exchange[half_at + mb_linear] = v;
  barrier();
  return mb_lane_exchange[half_at + (mb_linear > 0u ? mb_linear - 1u : 0u)];
}

#endif

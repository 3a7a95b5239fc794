// SPDX-License-Identifier: MIT
// The integer contract of the quantized kernels (vec16.h) on AArch64 Advanced SIMD
// (NEON): sixteen int32 lanes in four q registers, lanes 0-3, 4-7, 8-11 and 12-15.
//
// Baseline ARMv8-A has no mixed-sign byte dot product (USDOT needs I8MM), so dot4 widens to 16
// bits: a weight level (at most 255) times an activation level (at most 127 in magnitude) is at
// most 32385, exact in int16, and pairwise widening additions finish each lane's four products
// exactly. Integer sums are exact in any order, so the bits are those of every other target.
#pragma once

#include <arm_neon.h>

#include <cstdint>

#include "ops/cpu/vec16_neon.h"

namespace mb::cpu_neon {

inline constexpr bool kDot4FullRange = true;
inline constexpr int kQuantRows = 2;

struct I32x16 {
  int32x4_t q[4];
};
struct W64 {
  uint8x16_t q[4];  // bytes of lanes 4i .. 4i + 3
};

// See ivec16_avx512.h (GCC's register copies measured there); a no-op here.
inline void i32_keep(I32x16&) {}
inline I32x16 i32_zero() {
  const int32x4_t z = vdupq_n_s32(0);
  return {{z, z, z, z}};
}
inline I32x16 i32_set1(int32_t x) {
  const int32x4_t v = vdupq_n_s32(x);
  return {{v, v, v, v}};
}
inline I32x16 i32_load(const int32_t* p) {
  return {{vld1q_s32(p), vld1q_s32(p + 4), vld1q_s32(p + 8), vld1q_s32(p + 12)}};
}
inline I32x16 i32_add(I32x16 a, I32x16 b) {
  for (int i = 0; i < 4; ++i) a.q[i] = vaddq_s32(a.q[i], b.q[i]);
  return a;
}
inline I32x16 i32_sub(I32x16 a, I32x16 b) {
  for (int i = 0; i < 4; ++i) a.q[i] = vsubq_s32(a.q[i], b.q[i]);
  return a;
}
inline I32x16 i32_mul(I32x16 a, I32x16 b) {
  for (int i = 0; i < 4; ++i) a.q[i] = vmulq_s32(a.q[i], b.q[i]);
  return a;
}
// vcvtq_f32_s32 rounds to nearest even (the FPCR default), as cvtdq2ps does.
inline Vec16 i32_to_f32(I32x16 a) {
  Vec16 r;
  for (int i = 0; i < 4; ++i) r.q[i] = vcvtq_f32_s32(a.q[i]);
  return r;
}
inline W64 load_w64(const uint8_t* p) {
  return {{vld1q_u8(p), vld1q_u8(p + 16), vld1q_u8(p + 32), vld1q_u8(p + 48)}};
}
inline I32x16 dot4(I32x16 acc, const W64& w, int32_t x4) {
  // x0 x1 x2 x3 x0 x1 x2 x3 widened to int16.
  const int16x8_t x = vmovl_s8(vreinterpret_s8_s32(vdup_n_s32(x4)));
  for (int i = 0; i < 4; ++i) {
    const int16x8_t lo = vreinterpretq_s16_u16(vmovl_u8(vget_low_u8(w.q[i])));  // lanes 4i, 4i + 1
    const int16x8_t hi = vreinterpretq_s16_u16(vmovl_high_u8(w.q[i]));          // lanes 4i + 2, 4i + 3
    const int32x4_t pairs_lo = vpaddlq_s16(vmulq_s16(lo, x));
    const int32x4_t pairs_hi = vpaddlq_s16(vmulq_s16(hi, x));
    acc.q[i] = vaddq_s32(acc.q[i], vpaddq_s32(pairs_lo, pairs_hi));
  }
  return acc;
}
inline void store_i8(int8_t* p, Vec16 integral) {
  int16x8_t words[2];
  for (int i = 0; i < 2; ++i)
    words[i] = vcombine_s16(vqmovn_s32(vcvtq_s32_f32(integral.q[2 * i])),
                            vqmovn_s32(vcvtq_s32_f32(integral.q[2 * i + 1])));
  vst1q_s8(p, vcombine_s8(vqmovn_s16(words[0]), vqmovn_s16(words[1])));
}

inline I32x16 i32_load_u8(const uint8_t* p) {
  const uint8x16_t bytes = vld1q_u8(p);
  const uint16x8_t lo = vmovl_u8(vget_low_u8(bytes)), hi = vmovl_high_u8(bytes);
  return {{vreinterpretq_s32_u32(vmovl_u16(vget_low_u16(lo))), vreinterpretq_s32_u32(vmovl_high_u16(lo)),
           vreinterpretq_s32_u32(vmovl_u16(vget_low_u16(hi))), vreinterpretq_s32_u32(vmovl_high_u16(hi))}};
}
// The bits of each float lane as an int32 lane, and back (no conversion).
inline I32x16 f32_bits(Vec16 a) {
  I32x16 r;
  for (int i = 0; i < 4; ++i) r.q[i] = vreinterpretq_s32_f32(a.q[i]);
  return r;
}
inline Vec16 bits_f32(I32x16 a) {
  Vec16 r;
  for (int i = 0; i < 4; ++i) r.q[i] = vreinterpretq_f32_s32(a.q[i]);
  return r;
}
inline I32x16 i32_and(I32x16 a, I32x16 b) {
  for (int i = 0; i < 4; ++i) a.q[i] = vandq_s32(a.q[i], b.q[i]);
  return a;
}
inline I32x16 i32_or(I32x16 a, I32x16 b) {
  for (int i = 0; i < 4; ++i) a.q[i] = vorrq_s32(a.q[i], b.q[i]);
  return a;
}
template <int N>
inline I32x16 i32_shr(I32x16 a) {
  for (int i = 0; i < 4; ++i) a.q[i] = vreinterpretq_s32_u32(vshrq_n_u32(vreinterpretq_u32_s32(a.q[i]), N));
  return a;
}
template <int N>
inline I32x16 i32_shl(I32x16 a) {
  for (int i = 0; i < 4; ++i) a.q[i] = vshlq_n_s32(a.q[i], N);
  return a;
}
inline W64 w64_low_nibbles(W64 w) {
  for (int i = 0; i < 4; ++i) w.q[i] = vandq_u8(w.q[i], vdupq_n_u8(15));
  return w;
}
inline W64 w64_high_nibbles(W64 w) {
  for (int i = 0; i < 4; ++i) w.q[i] = vshrq_n_u8(w.q[i], 4);
  return w;
}

}  // namespace mb::cpu_neon

// SPDX-License-Identifier: MIT
// Vec16 on AArch64 Advanced SIMD (NEON): four q registers holding lanes 0-3, 4-7, 8-11 and
// 12-15. See vec16.h for the contract.
//
// Every function is the same single correctly rounded IEEE operation per lane as on the other
// targets: vfmaq_f32 is a fused multiply-add, vdivq_f32 a correctly rounded division, vrndnq_f32
// rounds to nearest even, and the f16 and bf16 widenings are exact. The AArch64 FPCR default
// (no flush-to-zero, no default-NaN mode) matches the x86 MXCSR default the other targets run
// under, so subnormals are kept here exactly as there. Two NEON instructions do not follow the
// contract and are not used: vminq/vmaxq return NaN when either input is NaN (x86 returns the
// second operand), so min and max are a compare and a select, as the scalar target writes them.
#pragma once

#include <arm_neon.h>

#include <cstdint>
#include <cstring>

namespace mb::cpu_neon {

// The prefill GEMM's register tile: kGemmRows rows, and at most kGemmAccVectors Vec16
// accumulators in all (each four q registers): 2 rows x the panel's 4 vectors, as measured
// before AVX2's tile changed (not re-tuned since: no AArch64 machine to measure it on).
inline constexpr int kGemmRows = 2;
inline constexpr int kGemmAccVectors = 8;

struct Vec16 {
  float32x4_t q[4];
};
struct Mask16 {
  uint32x4_t q[4];
};

inline Vec16 zero() {
  const float32x4_t z = vdupq_n_f32(0.0f);
  return {{z, z, z, z}};
}
inline Vec16 set1(float x) {
  const float32x4_t v = vdupq_n_f32(x);
  return {{v, v, v, v}};
}
inline Vec16 load(const float* p) {
  return {{vld1q_f32(p), vld1q_f32(p + 4), vld1q_f32(p + 8), vld1q_f32(p + 12)}};
}
inline Vec16 load_partial(const float* p, int n) {
  alignas(16) float lanes[16] = {};
  std::memcpy(lanes, p, sizeof(float) * n);
  return load(lanes);
}
inline void store(float* p, Vec16 a) {
  for (int i = 0; i < 4; ++i) vst1q_f32(p + 4 * i, a.q[i]);
}
inline void store_partial(float* p, Vec16 a, int n) {
  alignas(16) float lanes[16];
  store(lanes, a);
  std::memcpy(p, lanes, sizeof(float) * n);
}

// bf16 is the upper half of an f32: widening is a shift left by 16.
inline Vec16 load_bf16(const uint16_t* p) {
  const uint16x8_t lo = vld1q_u16(p), hi = vld1q_u16(p + 8);
  return {{vreinterpretq_f32_u32(vshll_n_u16(vget_low_u16(lo), 16)),
           vreinterpretq_f32_u32(vshll_high_n_u16(lo, 16)),
           vreinterpretq_f32_u32(vshll_n_u16(vget_low_u16(hi), 16)),
           vreinterpretq_f32_u32(vshll_high_n_u16(hi, 16))}};
}
inline Vec16 load_bf16_partial(const uint16_t* p, int n) {
  alignas(16) uint16_t lanes[16] = {};
  std::memcpy(lanes, p, sizeof(uint16_t) * n);
  return load_bf16(lanes);
}
// 32 bf16 stored pairwise interleaved (element 2l is lane l of `even`, 2l + 1 lane l of `odd`):
// read as sixteen little-endian 32-bit words, element 2l is the low half of word l.
inline void load_bf16_interleaved(const uint16_t* p, Vec16& even, Vec16& odd) {
  const uint32x4_t high_half = vdupq_n_u32(0xffff0000u);
  for (int i = 0; i < 4; ++i) {
    const uint32x4_t words = vreinterpretq_u32_u16(vld1q_u16(p + 8 * i));
    even.q[i] = vreinterpretq_f32_u32(vshlq_n_u32(words, 16));
    odd.q[i] = vreinterpretq_f32_u32(vandq_u32(words, high_half));
  }
}
// Only the `even` half of load_bf16_interleaved.
inline Vec16 load_bf16_even(const uint16_t* p) {
  Vec16 even;
  for (int i = 0; i < 4; ++i)
    even.q[i] = vreinterpretq_f32_u32(vshlq_n_u32(vreinterpretq_u32_u16(vld1q_u16(p + 8 * i)), 16));
  return even;
}
// f16 to f32 (fcvtl) is exact for every finite value, subnormals included, as F16C's vcvtph2ps.
inline Vec16 load_f16(const uint16_t* p) {
  const float16x8_t lo = vreinterpretq_f16_u16(vld1q_u16(p));
  const float16x8_t hi = vreinterpretq_f16_u16(vld1q_u16(p + 8));
  return {{vcvt_f32_f16(vget_low_f16(lo)), vcvt_high_f32_f16(lo), vcvt_f32_f16(vget_low_f16(hi)),
           vcvt_high_f32_f16(hi)}};
}
inline Vec16 load_f16_partial(const uint16_t* p, int n) {
  alignas(16) uint16_t lanes[16] = {};
  std::memcpy(lanes, p, sizeof(uint16_t) * n);
  return load_f16(lanes);
}

inline Vec16 add(Vec16 a, Vec16 b) {
  for (int i = 0; i < 4; ++i) a.q[i] = vaddq_f32(a.q[i], b.q[i]);
  return a;
}
inline Vec16 sub(Vec16 a, Vec16 b) {
  for (int i = 0; i < 4; ++i) a.q[i] = vsubq_f32(a.q[i], b.q[i]);
  return a;
}
inline Vec16 mul(Vec16 a, Vec16 b) {
  for (int i = 0; i < 4; ++i) a.q[i] = vmulq_f32(a.q[i], b.q[i]);
  return a;
}
inline Vec16 div(Vec16 a, Vec16 b) {
  for (int i = 0; i < 4; ++i) a.q[i] = vdivq_f32(a.q[i], b.q[i]);
  return a;
}
// a * b + c with one rounding.
inline Vec16 fma(Vec16 a, Vec16 b, Vec16 c) {
  for (int i = 0; i < 4; ++i) c.q[i] = vfmaq_f32(c.q[i], a.q[i], b.q[i]);
  return c;
}
// max/min follow the x86 rule: a when it compares greater (less), else b, so a NaN in either
// input yields b, and max(+0, -0) is -0.
inline Vec16 max(Vec16 a, Vec16 b) {
  for (int i = 0; i < 4; ++i) a.q[i] = vbslq_f32(vcgtq_f32(a.q[i], b.q[i]), a.q[i], b.q[i]);
  return a;
}
inline Vec16 min(Vec16 a, Vec16 b) {
  for (int i = 0; i < 4; ++i) a.q[i] = vbslq_f32(vcltq_f32(a.q[i], b.q[i]), a.q[i], b.q[i]);
  return a;
}
inline Vec16 round_even(Vec16 a) {
  for (int i = 0; i < 4; ++i) a.q[i] = vrndnq_f32(a.q[i]);
  return a;
}

// p * 2^n for integral n in [-126, 127]: 2^n, built from exponent bits, is exact, so the
// product is the one rounding (as vscalefps on AVX-512). fcvtzs converts NaN to 0, as the
// scalar target does.
inline Vec16 scale_pow2(Vec16 p, Vec16 n) {
  const int32x4_t bias = vdupq_n_s32(127);
  for (int i = 0; i < 4; ++i) {
    const int32x4_t biased = vaddq_s32(vcvtq_s32_f32(n.q[i]), bias);
    p.q[i] = vmulq_f32(p.q[i], vreinterpretq_f32_s32(vshlq_n_s32(biased, 23)));
  }
  return p;
}
// Splits positive normal x into mantissa m in [0.5, 1) and exponent e with x = m * 2^e.
inline void frexp(Vec16 x, Vec16& mantissa, Vec16& exponent) {
  const int32x4_t bias = vdupq_n_s32(126);
  const uint32x4_t mantissa_bits = vdupq_n_u32(0x007fffffu), half = vdupq_n_u32(0x3f000000u);
  for (int i = 0; i < 4; ++i) {
    const uint32x4_t bits = vreinterpretq_u32_f32(x.q[i]);
    exponent.q[i] = vcvtq_f32_s32(vsubq_s32(vreinterpretq_s32_u32(vshrq_n_u32(bits, 23)), bias));
    mantissa.q[i] = vreinterpretq_f32_u32(vorrq_u32(vandq_u32(bits, mantissa_bits), half));
  }
}

// Ordered comparisons: false when either input is NaN (as _CMP_*_OQ).
inline Mask16 less(Vec16 a, Vec16 b) {
  Mask16 m;
  for (int i = 0; i < 4; ++i) m.q[i] = vcltq_f32(a.q[i], b.q[i]);
  return m;
}
inline Mask16 equal(Vec16 a, Vec16 b) {
  Mask16 m;
  for (int i = 0; i < 4; ++i) m.q[i] = vceqq_f32(a.q[i], b.q[i]);
  return m;
}
inline Mask16 greater(Vec16 a, Vec16 b) {
  Mask16 m;
  for (int i = 0; i < 4; ++i) m.q[i] = vcgtq_f32(a.q[i], b.q[i]);
  return m;
}
inline Vec16 select(Mask16 m, Vec16 if_true, Vec16 if_false) {
  for (int i = 0; i < 4; ++i) if_true.q[i] = vbslq_f32(m.q[i], if_true.q[i], if_false.q[i]);
  return if_true;
}

// The fixed reduction tree: lanes i and i+8, then i and i+4, then i and i+2, then 0 and 1.
inline float reduce_sum(Vec16 a) {
  const float32x4_t s8_lo = vaddq_f32(a.q[0], a.q[2]);  // lanes 0-3 of l[i] + l[i+8]
  const float32x4_t s8_hi = vaddq_f32(a.q[1], a.q[3]);  // lanes 4-7
  const float32x4_t s4 = vaddq_f32(s8_lo, s8_hi);
  const float32x2_t s2 = vadd_f32(vget_low_f32(s4), vget_high_f32(s4));
  return vget_lane_f32(s2, 0) + vget_lane_f32(s2, 1);
}

}  // namespace mb::cpu_neon

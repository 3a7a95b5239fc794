// SPDX-License-Identifier: MIT
// Vec16 on AVX-512: one zmm register. See vec16.h for the contract all Vec16 types share.
#pragma once

#include <immintrin.h>

#include <cstdint>

namespace mb::cpu_avx512 {

// The prefill GEMM's register tile: kGemmRows rows, and at most kGemmAccVectors Vec16
// accumulators in all: 6 rows x the panel's 4 vectors use 24 of the 32 zmm registers.
inline constexpr int kGemmRows = 6;
inline constexpr int kGemmAccVectors = 24;

struct Vec16 {
  __m512 v;
};
using Mask16 = __mmask16;

inline __mmask16 first_lanes(int n) {
  return static_cast<__mmask16>((1u << n) - 1u);
}

inline Vec16 zero() {
  return {_mm512_setzero_ps()};
}
inline Vec16 set1(float x) {
  return {_mm512_set1_ps(x)};
}
inline Vec16 load(const float* p) {
  return {_mm512_loadu_ps(p)};
}
inline Vec16 load_partial(const float* p, int n) {
  return {_mm512_maskz_loadu_ps(first_lanes(n), p)};
}
inline void store(float* p, Vec16 a) {
  _mm512_storeu_ps(p, a.v);
}
inline void store_partial(float* p, Vec16 a, int n) {
  _mm512_mask_storeu_ps(p, first_lanes(n), a.v);
}

inline Vec16 widen_bf16(__m256i h) {
  return {_mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16))};
}
inline Vec16 load_bf16(const uint16_t* p) {
  return widen_bf16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
}
inline Vec16 load_bf16_partial(const uint16_t* p, int n) {
  return widen_bf16(_mm256_maskz_loadu_epi16(first_lanes(n), p));
}
// 32 bf16 stored pairwise interleaved (element 2l is lane l of `even`, 2l + 1 lane l of `odd`).
inline void load_bf16_interleaved(const uint16_t* p, Vec16& even, Vec16& odd) {
  const __m512i words = _mm512_loadu_si512(p);
  even = {_mm512_castsi512_ps(_mm512_slli_epi32(words, 16))};
  odd = {_mm512_castsi512_ps(_mm512_and_si512(words, _mm512_set1_epi32(static_cast<int>(0xffff0000u))))};
}
// Only the `even` half of load_bf16_interleaved.
inline Vec16 load_bf16_even(const uint16_t* p) {
  return {_mm512_castsi512_ps(_mm512_slli_epi32(_mm512_loadu_si512(p), 16))};
}
inline Vec16 load_f16(const uint16_t* p) {
  return {_mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)))};
}
inline Vec16 load_f16_partial(const uint16_t* p, int n) {
  return {_mm512_cvtph_ps(_mm256_maskz_loadu_epi16(first_lanes(n), p))};
}

inline Vec16 add(Vec16 a, Vec16 b) {
  return {_mm512_add_ps(a.v, b.v)};
}
inline Vec16 sub(Vec16 a, Vec16 b) {
  return {_mm512_sub_ps(a.v, b.v)};
}
inline Vec16 mul(Vec16 a, Vec16 b) {
  return {_mm512_mul_ps(a.v, b.v)};
}
inline Vec16 div(Vec16 a, Vec16 b) {
  return {_mm512_div_ps(a.v, b.v)};
}
inline Vec16 fma(Vec16 a, Vec16 b, Vec16 c) {
  return {_mm512_fmadd_ps(a.v, b.v, c.v)};
}
// max/min follow the x86 rule the scalar version copies: when either input is NaN, return b.
inline Vec16 max(Vec16 a, Vec16 b) {
  return {_mm512_max_ps(a.v, b.v)};
}
inline Vec16 min(Vec16 a, Vec16 b) {
  return {_mm512_min_ps(a.v, b.v)};
}
inline Vec16 round_even(Vec16 a) {
  return {_mm512_roundscale_ps(a.v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)};
}

// p * 2^n for integral n in [-126, 127]: one correctly rounded operation (vscalefps).
inline Vec16 scale_pow2(Vec16 p, Vec16 n) {
  return {_mm512_scalef_ps(p.v, n.v)};
}
// Splits positive normal x into mantissa m in [0.5, 1) and exponent e with x = m * 2^e.
inline void frexp(Vec16 x, Vec16& mantissa, Vec16& exponent) {
  const __m512i bits = _mm512_castps_si512(x.v);
  exponent = {_mm512_cvtepi32_ps(_mm512_sub_epi32(_mm512_srli_epi32(bits, 23), _mm512_set1_epi32(126)))};
  const __m512i m =
      _mm512_or_si512(_mm512_and_si512(bits, _mm512_set1_epi32(0x007fffff)), _mm512_set1_epi32(0x3f000000));
  mantissa = {_mm512_castsi512_ps(m)};
}

inline Mask16 less(Vec16 a, Vec16 b) {
  return _mm512_cmp_ps_mask(a.v, b.v, _CMP_LT_OQ);
}
inline Mask16 equal(Vec16 a, Vec16 b) {
  return _mm512_cmp_ps_mask(a.v, b.v, _CMP_EQ_OQ);
}
inline Mask16 greater(Vec16 a, Vec16 b) {
  return _mm512_cmp_ps_mask(a.v, b.v, _CMP_GT_OQ);
}
inline Vec16 select(Mask16 m, Vec16 if_true, Vec16 if_false) {
  return {_mm512_mask_blend_ps(m, if_false.v, if_true.v)};
}

// The fixed reduction tree: lanes i and i+8, then i and i+4, then i and i+2, then 0 and 1.
inline float reduce_sum(Vec16 a) {
  const __m256 s8 = _mm256_add_ps(_mm512_castps512_ps256(a.v), _mm512_extractf32x8_ps(a.v, 1));
  const __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(s8), _mm256_extractf128_ps(s8, 1));
  const __m128 s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
  const __m128 s1 = _mm_add_ss(s2, _mm_movehdup_ps(s2));
  return _mm_cvtss_f32(s1);
}

}  // namespace mb::cpu_avx512

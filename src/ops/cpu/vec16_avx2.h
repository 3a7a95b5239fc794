// SPDX-License-Identifier: MIT
// Vec16 on AVX2: two ymm registers holding lanes 0-7 and 8-15. See vec16.h for the contract.
#pragma once

#include <immintrin.h>

#include <cstdint>
#include <cstring>

namespace mb::cpu_avx2 {

// The prefill GEMM's register tile: kGemmRows rows, and at most kGemmAccVectors Vec16
// accumulators in all (each two ymm registers). 6 rows x 1 vector is 12 of the 16 ymm registers,
// leaving two for the panel's weights and one for the broadcast x: every weight load then feeds
// six FMAs. (The 2 x 4 tile this replaced held 16 ymm accumulators, so its weights spilled.)
inline constexpr int kGemmRows = 6;
inline constexpr int kGemmAccVectors = 6;

struct Vec16 {
  __m256 lo, hi;
};
struct Mask16 {
  __m256 lo, hi;
};

inline Vec16 zero() {
  return {_mm256_setzero_ps(), _mm256_setzero_ps()};
}
inline Vec16 set1(float x) {
  return {_mm256_set1_ps(x), _mm256_set1_ps(x)};
}
inline Vec16 load(const float* p) {
  return {_mm256_loadu_ps(p), _mm256_loadu_ps(p + 8)};
}
inline Vec16 load_partial(const float* p, int n) {
  alignas(32) float lanes[16] = {};
  std::memcpy(lanes, p, sizeof(float) * n);
  return load(lanes);
}
inline void store(float* p, Vec16 a) {
  _mm256_storeu_ps(p, a.lo);
  _mm256_storeu_ps(p + 8, a.hi);
}
inline void store_partial(float* p, Vec16 a, int n) {
  alignas(32) float lanes[16];
  store(lanes, a);
  std::memcpy(p, lanes, sizeof(float) * n);
}

inline __m256 widen_bf16(__m128i h) {
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}
inline Vec16 load_bf16(const uint16_t* p) {
  return {widen_bf16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))),
          widen_bf16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 8)))};
}
inline Vec16 load_bf16_partial(const uint16_t* p, int n) {
  alignas(32) uint16_t lanes[16] = {};
  std::memcpy(lanes, p, sizeof(uint16_t) * n);
  return load_bf16(lanes);
}
inline void load_bf16_interleaved(const uint16_t* p, Vec16& even, Vec16& odd) {
  const __m256i lo = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
  const __m256i hi = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 16));
  const __m256i mask = _mm256_set1_epi32(static_cast<int>(0xffff0000u));
  even = {_mm256_castsi256_ps(_mm256_slli_epi32(lo, 16)), _mm256_castsi256_ps(_mm256_slli_epi32(hi, 16))};
  odd = {_mm256_castsi256_ps(_mm256_and_si256(lo, mask)), _mm256_castsi256_ps(_mm256_and_si256(hi, mask))};
}
inline Vec16 load_bf16_even(const uint16_t* p) {
  Vec16 even, odd;
  load_bf16_interleaved(p, even, odd);
  return even;
}
inline Vec16 load_f16(const uint16_t* p) {
  return {_mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))),
          _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 8)))};
}
inline Vec16 load_f16_partial(const uint16_t* p, int n) {
  alignas(32) uint16_t lanes[16] = {};
  std::memcpy(lanes, p, sizeof(uint16_t) * n);
  return load_f16(lanes);
}

inline Vec16 add(Vec16 a, Vec16 b) {
  return {_mm256_add_ps(a.lo, b.lo), _mm256_add_ps(a.hi, b.hi)};
}
inline Vec16 sub(Vec16 a, Vec16 b) {
  return {_mm256_sub_ps(a.lo, b.lo), _mm256_sub_ps(a.hi, b.hi)};
}
inline Vec16 mul(Vec16 a, Vec16 b) {
  return {_mm256_mul_ps(a.lo, b.lo), _mm256_mul_ps(a.hi, b.hi)};
}
inline Vec16 div(Vec16 a, Vec16 b) {
  return {_mm256_div_ps(a.lo, b.lo), _mm256_div_ps(a.hi, b.hi)};
}
inline Vec16 fma(Vec16 a, Vec16 b, Vec16 c) {
  return {_mm256_fmadd_ps(a.lo, b.lo, c.lo), _mm256_fmadd_ps(a.hi, b.hi, c.hi)};
}
inline Vec16 max(Vec16 a, Vec16 b) {
  return {_mm256_max_ps(a.lo, b.lo), _mm256_max_ps(a.hi, b.hi)};
}
inline Vec16 min(Vec16 a, Vec16 b) {
  return {_mm256_min_ps(a.lo, b.lo), _mm256_min_ps(a.hi, b.hi)};
}
inline Vec16 round_even(Vec16 a) {
  constexpr int mode = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC;
  return {_mm256_round_ps(a.lo, mode), _mm256_round_ps(a.hi, mode)};
}

// p * 2^n for integral n in [-126, 127]: 2^n, built from exponent bits, is exact, so the
// product is the one rounding (as vscalefps on AVX-512).
inline __m256 scale_pow2_8(__m256 p, __m256 n) {
  const __m256i biased = _mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127));
  return _mm256_mul_ps(p, _mm256_castsi256_ps(_mm256_slli_epi32(biased, 23)));
}
inline Vec16 scale_pow2(Vec16 p, Vec16 n) {
  return {scale_pow2_8(p.lo, n.lo), scale_pow2_8(p.hi, n.hi)};
}

inline void frexp8(__m256 x, __m256& mantissa, __m256& exponent) {
  const __m256i bits = _mm256_castps_si256(x);
  exponent = _mm256_cvtepi32_ps(_mm256_sub_epi32(_mm256_srli_epi32(bits, 23), _mm256_set1_epi32(126)));
  const __m256i m =
      _mm256_or_si256(_mm256_and_si256(bits, _mm256_set1_epi32(0x007fffff)), _mm256_set1_epi32(0x3f000000));
  mantissa = _mm256_castsi256_ps(m);
}
inline void frexp(Vec16 x, Vec16& mantissa, Vec16& exponent) {
  frexp8(x.lo, mantissa.lo, exponent.lo);
  frexp8(x.hi, mantissa.hi, exponent.hi);
}

inline Mask16 less(Vec16 a, Vec16 b) {
  return {_mm256_cmp_ps(a.lo, b.lo, _CMP_LT_OQ), _mm256_cmp_ps(a.hi, b.hi, _CMP_LT_OQ)};
}
inline Mask16 equal(Vec16 a, Vec16 b) {
  return {_mm256_cmp_ps(a.lo, b.lo, _CMP_EQ_OQ), _mm256_cmp_ps(a.hi, b.hi, _CMP_EQ_OQ)};
}
inline Mask16 greater(Vec16 a, Vec16 b) {
  return {_mm256_cmp_ps(a.lo, b.lo, _CMP_GT_OQ), _mm256_cmp_ps(a.hi, b.hi, _CMP_GT_OQ)};
}
inline Vec16 select(Mask16 m, Vec16 if_true, Vec16 if_false) {
  return {_mm256_blendv_ps(if_false.lo, if_true.lo, m.lo), _mm256_blendv_ps(if_false.hi, if_true.hi, m.hi)};
}

inline float reduce_sum(Vec16 a) {
  const __m256 s8 = _mm256_add_ps(a.lo, a.hi);
  const __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(s8), _mm256_extractf128_ps(s8, 1));
  const __m128 s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
  const __m128 s1 = _mm_add_ss(s2, _mm_movehdup_ps(s2));
  return _mm_cvtss_f32(s1);
}

}  // namespace mb::cpu_avx2

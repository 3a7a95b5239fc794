// SPDX-License-Identifier: MIT
// The integer side of the quantized-matmul contract on AVX2 (see vec16.h): sixteen int32 lanes
// in two ymm registers.
#pragma once

#include <immintrin.h>

#include <cstdint>

#include "ops/cpu/vec16_avx2.h"

namespace mb::cpu_avx2 {

// vpmaddubsw adds pairs of byte products into saturating int16, exact only while every weight
// byte is at most 127 (2 * 127 * 128 < 2^15); full-range bytes (Q8_0) are split into nibbles.
inline constexpr bool kDot4FullRange = false;
inline constexpr int kQuantRows = 2;

struct I32x16 {
  __m256i lo, hi;
};
struct W64 {
  __m256i lo, hi;
};

// See ivec16_avx512.h (the register copies measured there); a no-op here.
inline void i32_keep(I32x16&) {}
inline I32x16 i32_zero() {
  return {_mm256_setzero_si256(), _mm256_setzero_si256()};
}
inline I32x16 i32_set1(int32_t x) {
  return {_mm256_set1_epi32(x), _mm256_set1_epi32(x)};
}
inline I32x16 i32_load(const int32_t* p) {
  return {_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)),
          _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 8))};
}
inline I32x16 i32_add(I32x16 a, I32x16 b) {
  return {_mm256_add_epi32(a.lo, b.lo), _mm256_add_epi32(a.hi, b.hi)};
}
inline I32x16 i32_sub(I32x16 a, I32x16 b) {
  return {_mm256_sub_epi32(a.lo, b.lo), _mm256_sub_epi32(a.hi, b.hi)};
}
inline I32x16 i32_mul(I32x16 a, I32x16 b) {
  return {_mm256_mullo_epi32(a.lo, b.lo), _mm256_mullo_epi32(a.hi, b.hi)};
}
inline Vec16 i32_to_f32(I32x16 a) {
  return {_mm256_cvtepi32_ps(a.lo), _mm256_cvtepi32_ps(a.hi)};
}
inline W64 load_w64(const uint8_t* p) {
  return {_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)),
          _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 32))};
}
// Requires every byte of w to be at most 127 (see kDot4FullRange).
inline I32x16 dot4(I32x16 acc, W64 w, int32_t x4) {
  const __m256i x = _mm256_set1_epi32(x4);
  const __m256i ones = _mm256_set1_epi16(1);
  return {_mm256_add_epi32(acc.lo, _mm256_madd_epi16(_mm256_maddubs_epi16(w.lo, x), ones)),
          _mm256_add_epi32(acc.hi, _mm256_madd_epi16(_mm256_maddubs_epi16(w.hi, x), ones))};
}

inline void store_i8(int8_t* p, Vec16 integral) {
  // Saturating packs keep every value in [-127, 127]; the permute undoes packs' lane interleave.
  const __m256i words = _mm256_permute4x64_epi64(
      _mm256_packs_epi32(_mm256_cvttps_epi32(integral.lo), _mm256_cvttps_epi32(integral.hi)), 0xd8);
  _mm_storeu_si128(reinterpret_cast<__m128i*>(p),
                   _mm_packs_epi16(_mm256_castsi256_si128(words), _mm256_extracti128_si256(words, 1)));
}

inline I32x16 i32_load_u8(const uint8_t* p) {
  return {_mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p))),
          _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p + 8)))};
}
// The bits of each float lane as an int32 lane, and back (no conversion).
inline I32x16 f32_bits(Vec16 a) {
  return {_mm256_castps_si256(a.lo), _mm256_castps_si256(a.hi)};
}
inline Vec16 bits_f32(I32x16 a) {
  return {_mm256_castsi256_ps(a.lo), _mm256_castsi256_ps(a.hi)};
}
inline I32x16 i32_and(I32x16 a, I32x16 b) {
  return {_mm256_and_si256(a.lo, b.lo), _mm256_and_si256(a.hi, b.hi)};
}
inline I32x16 i32_or(I32x16 a, I32x16 b) {
  return {_mm256_or_si256(a.lo, b.lo), _mm256_or_si256(a.hi, b.hi)};
}
template <int N>
inline I32x16 i32_shr(I32x16 a) {
  return {_mm256_srli_epi32(a.lo, N), _mm256_srli_epi32(a.hi, N)};
}
template <int N>
inline I32x16 i32_shl(I32x16 a) {
  return {_mm256_slli_epi32(a.lo, N), _mm256_slli_epi32(a.hi, N)};
}
inline W64 w64_low_nibbles(W64 w) {
  const __m256i mask = _mm256_set1_epi8(15);
  return {_mm256_and_si256(w.lo, mask), _mm256_and_si256(w.hi, mask)};
}
inline W64 w64_high_nibbles(W64 w) {
  const __m256i mask = _mm256_set1_epi8(15);
  return {_mm256_and_si256(_mm256_srli_epi16(w.lo, 4), mask),
          _mm256_and_si256(_mm256_srli_epi16(w.hi, 4), mask)};
}

}  // namespace mb::cpu_avx2

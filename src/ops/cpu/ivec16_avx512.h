// SPDX-License-Identifier: MIT
// The integer side of the quantized-matmul contract on AVX-512 with VNNI (see vec16.h).
#pragma once

#include <immintrin.h>

#include <cstdint>

#include "ops/cpu/vec16_avx512.h"

namespace mb::cpu_avx512 {

inline constexpr bool kDot4FullRange = true;  // vpdpbusd never saturates
inline constexpr int kQuantRows = 4;

struct I32x16 {
  __m512i v;
};
struct W64 {
  __m512i v;
};

// Tells GCC the accumulator stays in its register across a loop's iterations: without it, GCC
// copies each vpdpbusd accumulator into another register and back on every iteration of the
// quantized matmul's inner loop (a third of that loop's instructions). No instruction results.
inline void i32_keep(I32x16& a) {
  asm("" : "+v"(a.v));
}
inline I32x16 i32_zero() {
  return {_mm512_setzero_si512()};
}
inline I32x16 i32_set1(int32_t x) {
  return {_mm512_set1_epi32(x)};
}
inline I32x16 i32_load(const int32_t* p) {
  return {_mm512_loadu_si512(p)};
}
inline I32x16 i32_add(I32x16 a, I32x16 b) {
  return {_mm512_add_epi32(a.v, b.v)};
}
inline I32x16 i32_sub(I32x16 a, I32x16 b) {
  return {_mm512_sub_epi32(a.v, b.v)};
}
inline I32x16 i32_mul(I32x16 a, I32x16 b) {
  return {_mm512_mullo_epi32(a.v, b.v)};
}
inline Vec16 i32_to_f32(I32x16 a) {
  return {_mm512_cvtepi32_ps(a.v)};
}
inline W64 load_w64(const uint8_t* p) {
  return {_mm512_loadu_si512(p)};
}
inline I32x16 dot4(I32x16 acc, W64 w, int32_t x4) {
  return {_mm512_dpbusd_epi32(acc.v, w.v, _mm512_set1_epi32(x4))};
}

inline void store_i8(int8_t* p, Vec16 integral) {
  _mm_storeu_si128(reinterpret_cast<__m128i*>(p), _mm512_cvtepi32_epi8(_mm512_cvttps_epi32(integral.v)));
}

inline I32x16 i32_load_u8(const uint8_t* p) {
  return {_mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)))};
}
// The bits of each float lane as an int32 lane, and back (no conversion).
inline I32x16 f32_bits(Vec16 a) {
  return {_mm512_castps_si512(a.v)};
}
inline Vec16 bits_f32(I32x16 a) {
  return {_mm512_castsi512_ps(a.v)};
}
inline I32x16 i32_and(I32x16 a, I32x16 b) {
  return {_mm512_and_si512(a.v, b.v)};
}
inline I32x16 i32_or(I32x16 a, I32x16 b) {
  return {_mm512_or_si512(a.v, b.v)};
}
template <int N>
inline I32x16 i32_shr(I32x16 a) {
  return {_mm512_srli_epi32(a.v, N)};
}
template <int N>
inline I32x16 i32_shl(I32x16 a) {
  return {_mm512_slli_epi32(a.v, N)};
}
inline W64 w64_low_nibbles(W64 w) {
  return {_mm512_and_si512(w.v, _mm512_set1_epi8(15))};
}
inline W64 w64_high_nibbles(W64 w) {
  return {_mm512_and_si512(_mm512_srli_epi16(w.v, 4), _mm512_set1_epi8(15))};
}

}  // namespace mb::cpu_avx512

// SPDX-License-Identifier: MIT
// The integer side of the quantized-matmul contract in portable scalar code (see vec16.h).
#pragma once

#include <cstdint>
#include <cstring>

#include "ops/cpu/vec16_scalar.h"

namespace mb::cpu_scalar {

inline constexpr bool kDot4FullRange = true;
inline constexpr int kQuantRows = 4;

struct I32x16 {
  int32_t v[16];
};
struct W64 {
  uint8_t b[64];
};

// See ivec16_avx512.h; nothing to keep here.
inline void i32_keep(I32x16&) {}
inline I32x16 i32_zero() {
  return I32x16{};
}
inline I32x16 i32_set1(int32_t x) {
  I32x16 r;
  for (int32_t& lane : r.v) lane = x;
  return r;
}
inline I32x16 i32_load(const int32_t* p) {
  I32x16 r;
  for (int i = 0; i < 16; ++i) r.v[i] = p[i];
  return r;
}
inline I32x16 i32_add(I32x16 a, I32x16 b) {
  for (int i = 0; i < 16; ++i) a.v[i] += b.v[i];
  return a;
}
inline I32x16 i32_sub(I32x16 a, I32x16 b) {
  for (int i = 0; i < 16; ++i) a.v[i] -= b.v[i];
  return a;
}
inline I32x16 i32_mul(I32x16 a, I32x16 b) {
  for (int i = 0; i < 16; ++i) a.v[i] *= b.v[i];
  return a;
}
inline Vec16 i32_to_f32(I32x16 a) {
  Vec16 r;
  for (int i = 0; i < 16; ++i) r.v[i] = static_cast<float>(a.v[i]);
  return r;
}
inline W64 load_w64(const uint8_t* p) {
  W64 w;
  for (int i = 0; i < 64; ++i) w.b[i] = p[i];
  return w;
}
inline I32x16 dot4(I32x16 acc, const W64& w, int32_t x4) {
  int8_t x[4];
  std::memcpy(x, &x4, 4);
  for (int l = 0; l < 16; ++l)
    acc.v[l] += w.b[4 * l] * x[0] + w.b[4 * l + 1] * x[1] + w.b[4 * l + 2] * x[2] + w.b[4 * l + 3] * x[3];
  return acc;
}

inline void store_i8(int8_t* p, Vec16 integral) {
  for (int i = 0; i < 16; ++i) p[i] = static_cast<int8_t>(integral.v[i]);
}

inline I32x16 i32_load_u8(const uint8_t* p) {
  I32x16 r;
  for (int i = 0; i < 16; ++i) r.v[i] = p[i];
  return r;
}
// The bits of each float lane as an int32 lane, and back (no conversion).
inline I32x16 f32_bits(Vec16 a) {
  I32x16 r;
  std::memcpy(r.v, a.v, sizeof r.v);
  return r;
}
inline Vec16 bits_f32(I32x16 a) {
  Vec16 r;
  std::memcpy(r.v, a.v, sizeof r.v);
  return r;
}
inline I32x16 i32_and(I32x16 a, I32x16 b) {
  for (int i = 0; i < 16; ++i) a.v[i] &= b.v[i];
  return a;
}
inline I32x16 i32_or(I32x16 a, I32x16 b) {
  for (int i = 0; i < 16; ++i) a.v[i] |= b.v[i];
  return a;
}
template <int N>
inline I32x16 i32_shr(I32x16 a) {
  for (int32_t& lane : a.v) lane = static_cast<int32_t>(static_cast<uint32_t>(lane) >> N);
  return a;
}
template <int N>
inline I32x16 i32_shl(I32x16 a) {
  for (int32_t& lane : a.v) lane = static_cast<int32_t>(static_cast<uint32_t>(lane) << N);
  return a;
}
inline W64 w64_low_nibbles(W64 w) {
  for (uint8_t& b : w.b) b &= 15;
  return w;
}
inline W64 w64_high_nibbles(W64 w) {
  for (uint8_t& b : w.b) b >>= 4;
  return w;
}

}  // namespace mb::cpu_scalar

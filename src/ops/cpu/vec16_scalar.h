// SPDX-License-Identifier: MIT
// Vec16 in portable scalar code: sixteen floats, every operation lane by lane with the same
// IEEE operations the SIMD versions use (fused multiply-add via std::fmaf, round to nearest
// even via std::nearbyint), so it produces the same bits. See vec16.h for the contract.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#include "core/dtype.h"

namespace mb::cpu_scalar {

// The prefill GEMM's register tile: kGemmRows rows, and at most kGemmAccVectors Vec16
// accumulators in all: 4 rows x the panel's 4 vectors.
inline constexpr int kGemmRows = 4;
inline constexpr int kGemmAccVectors = 16;

struct Vec16 {
  float v[16];
};
struct Mask16 {
  bool m[16];
};

template <class F>
inline Vec16 map2(Vec16 a, Vec16 b, F f) {
  Vec16 r;
  for (int i = 0; i < 16; ++i) r.v[i] = f(a.v[i], b.v[i]);
  return r;
}

inline Vec16 zero() {
  return Vec16{};
}
inline Vec16 set1(float x) {
  Vec16 r;
  for (float& lane : r.v) lane = x;
  return r;
}
// Copies n floats. A ThreadSanitizer build (which runs these scalar kernels, see best_isa())
// copies lane by lane: GCC does not instrument a 64-byte block copy, so TSan would not see the
// kernels' loads and stores at all.
inline void copy_lanes(float* dst, const float* src, int n) {
#if defined(__SANITIZE_THREAD__)
  for (int i = 0; i < n; ++i) dst[i] = src[i];
#else
  std::memcpy(dst, src, sizeof(float) * n);
#endif
}
inline Vec16 load(const float* p) {
  Vec16 r;
  copy_lanes(r.v, p, 16);
  return r;
}
inline Vec16 load_partial(const float* p, int n) {
  Vec16 r{};
  copy_lanes(r.v, p, n);
  return r;
}
inline void store(float* p, Vec16 a) {
  copy_lanes(p, a.v, 16);
}
inline void store_partial(float* p, Vec16 a, int n) {
  copy_lanes(p, a.v, n);
}
inline Vec16 load_bf16_partial(const uint16_t* p, int n) {
  Vec16 r{};
  for (int i = 0; i < n; ++i) r.v[i] = bf16_to_f32(p[i]);
  return r;
}
inline Vec16 load_bf16(const uint16_t* p) {
  return load_bf16_partial(p, 16);
}
inline void load_bf16_interleaved(const uint16_t* p, Vec16& even, Vec16& odd) {
  for (int i = 0; i < 16; ++i) {
    even.v[i] = bf16_to_f32(p[2 * i]);
    odd.v[i] = bf16_to_f32(p[2 * i + 1]);
  }
}
inline Vec16 load_bf16_even(const uint16_t* p) {
  Vec16 even, odd;
  load_bf16_interleaved(p, even, odd);
  return even;
}
inline Vec16 load_f16_partial(const uint16_t* p, int n) {
  Vec16 r{};
  for (int i = 0; i < n; ++i) r.v[i] = f16_to_f32(p[i]);
  return r;
}
inline Vec16 load_f16(const uint16_t* p) {
  return load_f16_partial(p, 16);
}

inline Vec16 add(Vec16 a, Vec16 b) {
  return map2(a, b, [](float x, float y) { return x + y; });
}
inline Vec16 sub(Vec16 a, Vec16 b) {
  return map2(a, b, [](float x, float y) { return x - y; });
}
inline Vec16 mul(Vec16 a, Vec16 b) {
  return map2(a, b, [](float x, float y) { return x * y; });
}
inline Vec16 div(Vec16 a, Vec16 b) {
  return map2(a, b, [](float x, float y) { return x / y; });
}
inline Vec16 fma(Vec16 a, Vec16 b, Vec16 c) {
  Vec16 r;
  for (int i = 0; i < 16; ++i) r.v[i] = std::fmaf(a.v[i], b.v[i], c.v[i]);
  return r;
}
inline Vec16 max(Vec16 a, Vec16 b) {
  return map2(a, b, [](float x, float y) { return x > y ? x : y; });
}
inline Vec16 min(Vec16 a, Vec16 b) {
  return map2(a, b, [](float x, float y) { return x < y ? x : y; });
}
inline Vec16 round_even(Vec16 a) {
  for (float& lane : a.v) lane = std::nearbyint(lane);
  return a;
}
// p * 2^n for integral n in [-126, 127]: 2^n, built from exponent bits, is exact, so the
// product is the one rounding (as vscalefps on AVX-512).
inline Vec16 scale_pow2(Vec16 p, Vec16 n) {
  for (int i = 0; i < 16; ++i) {
    // A NaN n (only possible when the exponential's argument was NaN) comes with a NaN p anyway;
    // converting it to int would be undefined, so it maps to 2^0.
    const int32_t exponent = std::isnan(n.v[i]) ? 0 : static_cast<int32_t>(n.v[i]);
    const uint32_t bits = static_cast<uint32_t>(exponent + 127) << 23;
    float power;
    std::memcpy(&power, &bits, sizeof bits);
    p.v[i] *= power;
  }
  return p;
}
inline void frexp(Vec16 x, Vec16& mantissa, Vec16& exponent) {
  for (int i = 0; i < 16; ++i) {
    uint32_t bits;
    std::memcpy(&bits, &x.v[i], sizeof bits);
    exponent.v[i] = static_cast<float>(static_cast<int32_t>(bits >> 23) - 126);
    const uint32_t m = (bits & 0x007fffffu) | 0x3f000000u;
    std::memcpy(&mantissa.v[i], &m, sizeof m);
  }
}
inline Mask16 less(Vec16 a, Vec16 b) {
  Mask16 r;
  for (int i = 0; i < 16; ++i) r.m[i] = a.v[i] < b.v[i];
  return r;
}
inline Mask16 equal(Vec16 a, Vec16 b) {
  Mask16 r;
  for (int i = 0; i < 16; ++i) r.m[i] = a.v[i] == b.v[i];
  return r;
}
inline Mask16 greater(Vec16 a, Vec16 b) {
  Mask16 r;
  for (int i = 0; i < 16; ++i) r.m[i] = a.v[i] > b.v[i];
  return r;
}
inline Vec16 select(Mask16 m, Vec16 if_true, Vec16 if_false) {
  Vec16 r;
  for (int i = 0; i < 16; ++i) r.v[i] = m.m[i] ? if_true.v[i] : if_false.v[i];
  return r;
}
inline float reduce_sum(Vec16 a) {
  float s8[8], s4[4];
  for (int i = 0; i < 8; ++i) s8[i] = a.v[i] + a.v[i + 8];
  for (int i = 0; i < 4; ++i) s4[i] = s8[i] + s8[i + 4];
  const float s2_0 = s4[0] + s4[2];
  const float s2_1 = s4[1] + s4[3];
  return s2_0 + s2_1;
}

}  // namespace mb::cpu_scalar

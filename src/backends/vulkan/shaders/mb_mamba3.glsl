// SPDX-License-Identifier: MIT
// Mamba-3's per-token arithmetic on the GPU with the bits of src/ops/cpu/mamba3_kernels.inc:
// the Cephes tanh and sin/cos polynomials, the token scalars (dt, lambda, A dt), and the RoPE
// phase update, which the CPU computes in double precision. Shaders that include this file need
// shaderFloat64 (VulkanBackend refuses Mamba-3 on a device without it).
//
// The phase update is acc = angle + omega dt (the product in f32, the sum in f64), then
// acc - 2 pi floor(acc / 2 pi), rounded to f32. Vulkan does not promise a correctly rounded f64
// division, and a floor of a quotient within an ulp of an integer depends on its last bit, so the
// quotient's floor is decided exactly there (mb_floor_over_two_pi); additions, subtractions,
// multiplications and conversions are correctly rounded, as the emulated fma of mb_math.glsl
// also assumes.
#ifndef MB_MAMBA3_GLSL
#define MB_MAMBA3_GLSL

#include "mb_math.glsl"

// std::min(a, b) of the CPU (b < a ? b : a: the first operand when either is NaN).
float mb_std_min(float a, float b) {
  return b < a ? b : a;
}

// tanh_v: an odd polynomial below |x| = 0.625, else 1 - 2 / (exp(2 |x|) + 1) with x's sign.
float mb_tanh(float x) {
  precise float negated = 0.0 - x;
  const float magnitude = mb_max(x, negated);
  precise float z = x * x;
  precise float p = -5.704988725e-03;
  p = mb_fma(p, z, 2.063908800e-02);
  p = mb_fma(p, z, -5.373971537e-02);
  p = mb_fma(p, z, 1.333144158e-01);
  p = mb_fma(p, z, -3.333328068e-01);
  precise float pz = p * z;
  const float small_value = mb_fma(pz, x, x);
  precise float twice = magnitude + magnitude;
  precise float denominator = mb_exp(twice) + 1.0;
  precise float large = 1.0 - mb_div(2.0, denominator);
  precise float negative_large = 0.0 - large;
  const float signed_large = x < 0.0 ? negative_large : large;
  return magnitude < 0.625 ? small_value : signed_large;
}

// sincos_v: Cody-Waite reduction by pi/2 and the Cephes polynomials on [-pi/4, pi/4].
void mb_sincos(float x, out float s, out float c) {
  precise float q = roundEven(x * 6.366197467e-01);
  precise float r = mb_fma(q, -1.570312500e+00, x);
  r = mb_fma(q, -4.837512970e-04, r);
  r = mb_fma(q, -7.549790126e-08, r);
  precise float z = r * r;
  precise float ps = -1.951529557e-04;
  ps = mb_fma(ps, z, 8.332161233e-03);
  ps = mb_fma(ps, z, -1.666665524e-01);
  precise float psz = ps * z;
  ps = mb_fma(psz, r, r);
  precise float pc = 2.443315680e-05;
  pc = mb_fma(pc, z, -1.388731645e-03);
  pc = mb_fma(pc, z, 4.166664556e-02);
  precise float pcz = pc * z;
  pc = mb_fma(pcz, z, mb_fma(z, -0.5, 1.0));
  // The quadrant q mod 4; floor(q / 4) = roundEven(q / 4 - 0.375) for integral q.
  precise float quarter = q * 0.25 - 0.375;
  precise float m = q - 4.0 * roundEven(quarter);
  precise float nps = 0.0 - ps;
  precise float npc = 0.0 - pc;
  s = m == 1.0 ? pc : m == 2.0 ? nps : m == 3.0 ? npc : ps;
  c = m == 1.0 ? nps : m == 2.0 ? npc : m == 3.0 ? ps : pc;
}

// The scalars of one head at one token (token_scalars): dt = softplus(dd_dt + dt_bias),
// A = min(-heavy_tail(dd_A), -a_floor), lambda = sigmoid(trap) = 1 / (1 + exp(-trap)).
struct TokenScalars {
  float dt, lambda, adt;  // adt = A dt, the log-decay
};

TokenScalars mb_token_scalars(float dd_dt, float dt_bias, float dd_a, float trap, float a_floor) {
  TokenScalars t;
  precise float raw = dd_dt + dt_bias;
  t.dt = mb_softplus(raw);
  precise float above = 1.0 + dd_a;
  precise float below = 1.0 - dd_a;
  const float heavy_tail = dd_a >= 0.0 ? above : mb_div(1.0, below);
  precise float negated_tail = 0.0 - heavy_tail;
  precise float negated_floor = 0.0 - a_floor;
  const float a = mb_std_min(negated_tail, negated_floor);
  precise float negated_trap = 0.0 - trap;
  precise float sum = 1.0 + mb_exp(negated_trap);
  t.lambda = mb_div(1.0, sum);
  precise float adt = a * t.dt;
  t.adt = adt;
  return t;
}

// The sign (-1, 0 or 1) of a + b + c + d, exactly: Shewchuk's growing expansion of error-free
// sums, whose largest nonzero component carries the sign.
double mb_two_sum(double a, double b, out double error) {
  precise double s = a + b;
  precise double bv = s - a;
  precise double av = s - bv;
  precise double e = (a - av) + (b - bv);
  error = e;
  return s;
}

double mb_sign_of_sum(double a, double b, double c, double d) {
  double e0, e1, e2, f0, f1, g0;
  // Expansion of a + b, then grown by c and by d: components in increasing magnitude.
  double s = mb_two_sum(a, b, e0);
  double q = mb_two_sum(c, e0, f0);
  q = mb_two_sum(q, s, f1);
  double h0 = f0, h1 = f1, h2 = q;
  q = mb_two_sum(d, h0, g0);
  double k0 = g0;
  q = mb_two_sum(q, h1, e1);
  double k1 = e1;
  q = mb_two_sum(q, h2, e2);
  double k2 = e2, k3 = q;
  if (k3 != 0.0) return sign(k3);
  if (k2 != 0.0) return sign(k2);
  if (k1 != 0.0) return sign(k1);
  return sign(k0);
}

// floor(acc / 2 pi) with the quotient correctly rounded, as the CPU's std::floor(acc / kTwoPi).
// Away from integers any near-correct quotient floors alike; within 1e-9 of an integer j the
// correctly rounded quotient reaches j exactly when acc / 2 pi exceeds the midpoint below j,
// j - u / 2 (u: the spacing of doubles below j), since a quotient is never a midpoint. With
// 2 pi = c_hi + c_lo (c_hi of 30 significant bits, c_lo of at most 23), the products with the
// integer j (below 2^23 here) and with the power of two u / 2 are exact, so the sign of
// acc - c_hi j - c_lo j + c_hi u/2 + c_lo u/2 decides.
double mb_floor_over_two_pi(double acc) {
  const double two_pi = packDouble2x32(uvec2(0x54442d18u, 0x401921fbu));
  const double two_pi_hi = packDouble2x32(uvec2(0x54000000u, 0x401921fbu));
  const double two_pi_lo = packDouble2x32(uvec2(0x00000000u, 0x3e310b46u));
  precise double q = acc / two_pi;
  precise double j = roundEven(q);
  if (isnan(q) || isinf(q) || j == 0.0 || abs(j) >= 8388608.0) return floor(q);
  precise double distance = abs(q - j);
  if (distance > 1e-9 * abs(q)) return floor(q);
  uvec2 bits = unpackDouble2x32(j);
  // The double next to j towards minus infinity (j is a nonzero integer, never a subnormal).
  if (j > 0.0) {
    if (bits.x == 0u) bits.y -= 1u;
    bits.x -= 1u;
  } else {
    bits.x += 1u;
    if (bits.x == 0u) bits.y += 1u;
  }
  precise double half_gap = (j - packDouble2x32(bits)) * 0.5;
  precise double hi_j = two_pi_hi * j;
  precise double rest = acc - hi_j;  // exact: acc is within a millionth of 2 pi j
  precise double lo_j = two_pi_lo * j;
  precise double hi_half = two_pi_hi * half_gap;
  precise double lo_half = two_pi_lo * half_gap;
  return mb_sign_of_sum(rest, -lo_j, hi_half, lo_half) > 0.0 ? j : j - 1.0;
}

// One RoPE phase step of head_kq: angle + omega dt, wrapped into [0, 2 pi] as the CPU does.
float mb_angle_step(float angle, float omega, float dt) {
  const double two_pi = packDouble2x32(uvec2(0x54442d18u, 0x401921fbu));
  precise float advance = omega * dt;
  precise double acc = double(angle) + double(advance);
  precise double turns = two_pi * mb_floor_over_two_pi(acc);
  precise double wrapped = acc - turns;
  return float(wrapped);
}

#endif

// SPDX-License-Identifier: MIT
// The engine's floating-point building blocks on the GPU, the counterparts of the CPU's Vec16
// contract (src/ops/cpu/vec16.h) and elementary functions (src/ops/cpu/vec16_math.inc).
//
// Every function here runs the same sequence of IEEE operations as the CPU code it ports, so a
// shader built from them can give the CPU's bits. That needs four things Vulkan does not give
// by default:
// - No contraction: a * b + c must stay two roundings unless written as mb_fma. Every variable
//   that holds a computed float is `precise` (SPIR-V NoContraction), which also forbids the
//   compiler from reassociating or otherwise rewriting the operations that produce it.
// - A fused multiply-add: Vulkan lets fma() be a multiply and an add with two roundings, and
//   some drivers do exactly that (llvmpipe/lavapipe lowers every 32-bit ffma to fmul + fadd).
//   mb_fma is the hardware fma() in the plain build; built with MB_EMULATED_FMA it computes
//   the correctly rounded a * b + c from double precision (see below). The host picks the
//   variant per device with a probe (src/backends/vulkan/vulkan_context.cc).
// - Correctly rounded division and square root: Vulkan's OpFDiv is only accurate to 2.5 ulp
//   and sqrt() is derived from inversesqrt(). mb_div and mb_sqrt start from those
//   approximations and correct the last bit with exact fma residuals, as CUDA's __fdiv_rn and
//   __fsqrt_rn do.
// - No library functions: exp, log, softplus and SiLU are the CPU's Cephes polynomials,
//   operation for operation; min/max/round/scale are written out with the CPU's NaN rules.
//
// Outside the contract (as on the CPU it is outside the tests): results in the subnormal range.
// Vulkan leaves 32-bit denormal handling to the implementation unless the device offers
// shaderDenormPreserveFloat32 (lavapipe does not), so a subnormal intermediate may be flushed.

#ifndef MB_MATH_GLSL
#define MB_MATH_GLSL

// 2^e for integral e in [-126, 127], exact (built from exponent bits).
float mb_pow2(int e) {
  return uintBitsToFloat(uint(e + 127) << 23);
}

#ifdef MB_EMULATED_FMA
// fma(a, b, c) with one rounding, from double precision: the product of two floats (24-bit
// significands) is exact in a double (53 bits); the sum with c is rounded once to double and its
// rounding error recovered exactly with TwoSum. Rounding that double to float directly could
// round twice in the wrong direction, so it is first rounded "to odd" (Boldo and Melquiond): an
// inexact sum with an even last bit moves one double ulp towards the exact value. A 53-bit
// round-to-odd value rounds to the correct 24-bit result (53 >= 24 + 2).
float mb_fma(float a, float b, float c) {
  precise double product = double(a) * double(b);
  precise double sum = product + double(c);
  precise double c_part = sum - product;
  precise double error = (product - (sum - c_part)) + (double(c) - c_part);
  if (error != 0.0 && !isinf(sum) && !isnan(sum)) {
    uvec2 words = unpackDouble2x32(sum);  // x: low word, y: high word
    if ((words.x & 1u) == 0u) {
      // sum != 0 here: an exact zero sum has no rounding error.
      bool away_from_zero = (error > 0.0) == (sum > 0.0);
      if (away_from_zero) {
        words.x += 1u;  // an even low word does not carry
      } else {
        if (words.x == 0u) words.y -= 1u;
        words.x -= 1u;
      }
      sum = packDouble2x32(words);
    }
  }
  precise float result = float(sum);
  return result;
}
#else
float mb_fma(float a, float b, float c) {
  precise float result = fma(a, b, c);
  return result;
}
#endif

// The CPU's min and max (x86's rule: when either is NaN, the second operand is returned).
float mb_min(float a, float b) {
  return a < b ? a : b;
}
float mb_max(float a, float b) {
  return a > b ? a : b;
}

// p * 2^n for integral n in [-126, 127], one rounding. A NaN n maps to 2^0, as on the CPU.
float mb_scale_pow2(float p, float n) {
  int exponent = isnan(n) ? 0 : int(n);
  precise float result = p * mb_pow2(exponent);
  return result;
}

// The neighbouring float of a finite nonzero x, above it (up) or below it.
float mb_next_float(float x, bool up) {
  uint bits = floatBitsToUint(x);
  return uintBitsToFloat((x > 0.0) == up ? bits + 1u : bits - 1u);
}

// a / b correctly rounded (IEEE division) for a, b and a / b in the normal range. An approximate
// reciprocal and one Newton step give a quotient q within one ulp; the exact remainders
// a - b q of q and of its neighbour towards a / b (exact by fma, as both are faithful) show which
// is nearer. a / b is never halfway between two floats, so there are no ties.
float mb_div(float a, float b) {
  if (isnan(a) || isnan(b) || isinf(a) || isinf(b) || a == 0.0 || b == 0.0) {
    precise float special = a / b;  // exact results (0, inf, NaN) by IEEE rules
    return special;
  }
  // Keep the divisor where the approximate reciprocal is specified (|b| in [2^-126, 2^126]);
  // the power-of-two scale is exact and is applied to the quotient at the end.
  float scale = 1.0;
  precise float divisor = b;
  if (abs(b) > mb_pow2(125)) {
    divisor = b * mb_pow2(-32);
    scale = mb_pow2(-32);
  } else if (abs(b) < mb_pow2(-125)) {
    divisor = b * mb_pow2(32);
    scale = mb_pow2(32);
  }
  precise float reciprocal = 1.0 / divisor;
  precise float q0 = a * reciprocal;
  if (q0 == 0.0 || isinf(q0)) {
    // The quotient overflows (or underflows): the remainder step below would turn inf into NaN.
    precise float outside = q0 * scale;
    return outside;
  }
  precise float q = mb_fma(mb_fma(-divisor, q0, a), reciprocal, q0);
  if (q == 0.0 || isinf(q) || isnan(q)) {
    precise float outside = q * scale;
    return outside;
  }
  float remainder = mb_fma(-divisor, q, a);
  if (remainder != 0.0) {
    float neighbour = mb_next_float(q, (remainder > 0.0) == (divisor > 0.0));
    if (abs(mb_fma(-divisor, neighbour, a)) < abs(remainder)) q = neighbour;
  }
  precise float result = q * scale;
  return result;
}

// sqrt(x) correctly rounded for x in the normal range. Starting from the approximate sqrt(), the
// result moves one ulp at a time by Tuckerman's test: s is the correctly rounded root exactly
// when below * s < x <= s * above (below, above: the neighbours of s), and fma computes the sign
// of each product's difference from x exactly.
float mb_sqrt(float x) {
  if (!(x > 0.0) || isinf(x)) {
    precise float special = sqrt(x);  // 0, negative, inf or NaN
    return special;
  }
  // Keep x and the products of roots well inside the normal range (an even power of two
  // scales the root exactly by half of it).
  precise float scaled = x;
  float root_scale = 1.0;
  if (x < mb_pow2(-100)) {
    scaled = x * mb_pow2(100);
    root_scale = mb_pow2(-50);
  } else if (x > mb_pow2(100)) {
    scaled = x * mb_pow2(-100);
    root_scale = mb_pow2(50);
  }
  precise float s = sqrt(scaled);
  for (int step = 0; step < 8; ++step) {
    float above = mb_next_float(s, true);
    float below = mb_next_float(s, false);
    if (mb_fma(-s, above, scaled) > 0.0) {
      s = above;
    } else if (mb_fma(-below, s, scaled) <= 0.0) {
      s = below;
    } else {
      break;
    }
  }
  precise float result = s * root_scale;
  return result;
}

// Cephes expf, as exp_v in vec16_math.inc: n = round(x / ln 2), r = x - n ln 2 (split
// constant), degree-7 polynomial, scaled by 2^n; the clamp keeps n in range and passes NaN.
float mb_exp(float x) {
  precise float clamped = mb_min(8.830000305e+01, mb_max(-8.730000305e+01, x));
  precise float n = roundEven(clamped * 1.442695022e+00);
  precise float r = mb_fma(n, -6.933593750e-01, clamped);
  r = mb_fma(n, 2.121944417e-04, r);
  precise float r2 = r * r;
  precise float p = 1.987569121e-04;
  p = mb_fma(p, r, 1.398199936e-03);
  p = mb_fma(p, r, 8.333452046e-03);
  p = mb_fma(p, r, 4.166579619e-02);
  p = mb_fma(p, r, 1.666666567e-01);
  p = mb_fma(p, r, 5.000000000e-01);
  p = mb_fma(p, r2, r);
  p = p + 1.0;
  return mb_scale_pow2(p, n);
}

// The scan's decay 2^x for x <= 0, as decay_exp2_v in vec16_math.inc (floored at 2^-64).
float mb_decay_exp2(float x) {
  precise float floored = mb_max(-64.0, x);
  precise float n = roundEven(floored);
  precise float f = floored - n;
  precise float p = 1.535336196e-04;
  p = mb_fma(p, f, 1.339887385e-03);
  p = mb_fma(p, f, 9.618436918e-03);
  p = mb_fma(p, f, 5.550332367e-02);
  p = mb_fma(p, f, 2.402264774e-01);
  p = mb_fma(p, f, 6.931471825e-01);
  p = mb_fma(p, f, 1.0);
  return mb_scale_pow2(p, n);
}

// Cephes logf for positive normal x, as log_v in vec16_math.inc.
float mb_log(float x) {
  uint bits = floatBitsToUint(x);
  precise float e = float(int(bits >> 23) - 126);
  float m = uintBitsToFloat((bits & 0x007fffffu) | 0x3f000000u);
  bool below = m < 7.071067691e-01;
  if (below) e = e - 1.0;
  precise float f = (below ? m + m : m) - 1.0;
  precise float f2 = f * f;
  precise float p = 7.037683576e-02;
  p = mb_fma(p, f, -1.151461005e-01);
  p = mb_fma(p, f, 1.167699844e-01);
  p = mb_fma(p, f, -1.242014095e-01);
  p = mb_fma(p, f, 1.424932331e-01);
  p = mb_fma(p, f, -1.666805744e-01);
  p = mb_fma(p, f, 2.000071406e-01);
  p = mb_fma(p, f, -2.499999404e-01);
  p = mb_fma(p, f, 3.333333135e-01);
  precise float y = (p * f) * f2;
  y = mb_fma(e, -2.121944417e-04, y);
  y = mb_fma(f2, -0.5, y);
  precise float result = f + y;
  return mb_fma(e, 6.933593750e-01, result);
}

// softplus as softplus_v: x above 20, else log1p(exp(x)) = log(u) * (e / (u - 1)), u = 1 + e.
float mb_softplus(float x) {
  if (x > 20.0) return x;
  float e = mb_exp(x);
  precise float u = 1.0 + e;
  if (u == 1.0) return e;
  precise float result = mb_log(u) * mb_div(e, u - 1.0);
  return result;
}

// SiLU as silu_v: x / (1 + exp(0 - x)).
float mb_silu(float x) {
  precise float negated = 0.0 - x;
  precise float denominator = 1.0 + mb_exp(negated);
  return mb_div(x, denominator);
}

// RMSNorm's 1 / sqrt(mean(x^2) + eps) for a row of `dim` values, from the CPU's sixteen lanes of
// the sum of squares (lane j accumulates x[j], x[j + 16], ... with fma), added in reduce_sum's
// fixed tree: (l[i] + l[i+8]), then +4, +2, +1. rms_norm.comp and the GEMMs' fused norm share it.
float mb_inverse_rms(float lanes[16], uint dim, float eps) {
  precise float s8[8];
  for (uint i = 0u; i < 8u; ++i) s8[i] = lanes[i] + lanes[i + 8u];
  precise float s4[4];
  for (uint i = 0u; i < 4u; ++i) s4[i] = s8[i] + s8[i + 4u];
  precise float total = (s4[0] + s4[2]) + (s4[1] + s4[3]);
  const float mean_square = mb_div(total, float(dim));
  precise float shifted = mean_square + eps;
  return mb_div(1.0, mb_sqrt(shifted));
}

#endif

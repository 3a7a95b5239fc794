// SPDX-License-Identifier: MIT
// The shaders' arithmetic (shaders/mb_math.glsl) against the CPU's, bit for bit: the fused
// multiply-add, correctly rounded division and square root, and the Cephes exp, softplus and
// SiLU of vec16_math.inc.
#include <cmath>
#include <cstring>
#include <random>

#include "common/test_util.h"
#include "ops/activations.h"
#include "vulkan/vulkan_test_util.h"

// A namespace of its own: the test binary compiles its files in batches (a unity build).
namespace mb::vulkan_math_test {
namespace {

using vulkan::Buffer;

enum Function : uint32_t { kFma = 0, kDiv, kSqrt, kExp, kDecayExp2, kSoftplus, kSilu, kLog };

std::vector<float> run_probe(vulkan::Context& ctx, Function function, const std::vector<float>& a,
                             const std::vector<float>& b, const std::vector<float>& c) {
  const uint32_t count = static_cast<uint32_t>(a.size());
  Buffer in_a = Buffer::from_floats(ctx, a), in_b = Buffer::from_floats(ctx, b),
         in_c = Buffer::from_floats(ctx, c);
  Buffer out(ctx, count * sizeof(float));
  const vulkan::KernelSpec spec{"math_probe", 4, 8, {}};
  const struct { uint32_t count, function; } push{count, function};
  vulkan::CommandSequence sequence(ctx, 1);
  sequence.begin();
  const Buffer* buffers[] = {&in_a, &in_b, &in_c, &out};
  sequence.dispatch(spec, buffers, &push, sizeof push, {(count + 63) / 64, 1, 1}, "math probe");
  sequence.end();
  sequence.run();
  return out.to_floats();
}

// Values over many binades, both signs, plus a few exact and awkward cases.
std::vector<float> spread_values(size_t count, uint64_t seed, float min_exponent, float max_exponent,
                                 bool positive_only) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> exponent(min_exponent, max_exponent), mantissa(1.0f, 2.0f);
  std::vector<float> values(count);
  for (float& v : values) {
    v = std::ldexp(mantissa(rng), static_cast<int>(exponent(rng)));
    if (!positive_only && (rng() & 1)) v = -v;
  }
  return values;
}

class VulkanMath : public test::VulkanTest {};

TEST_F(VulkanMath, FmaIsFusedBitForBit) {
  if (!ctx().exact_fma()) GTEST_SKIP() << "this device has neither a fused fma() nor shaderFloat64";
  auto a = spread_values(4096, 1, -20, 20, false), b = spread_values(4096, 2, -20, 20, false);
  std::vector<float> c(a.size());
  std::mt19937_64 rng(3);
  for (size_t i = 0; i < a.size(); ++i) {
    // Alternately a cancelling c (the product's rounding error decides the result) and a random one.
    c[i] = (i % 2 == 0) ? -(a[i] * b[i]) : spread_values(1, rng(), -40, 40, false)[0];
  }
  // Signed zeros and exact cancellation.
  a[0] = 0.0f, b[0] = -1.0f, c[0] = 0.0f;
  a[1] = 1.5f, b[1] = 2.0f, c[1] = -3.0f;
  const auto got = run_probe(ctx(), kFma, a, b, c);
  std::vector<float> expected(a.size());
  for (size_t i = 0; i < a.size(); ++i) expected[i] = std::fma(a[i], b[i], c[i]);
  EXPECT_EQ(test::first_bit_difference(got, expected), -1);
}

TEST_F(VulkanMath, DivisionAndSquareRootAreCorrectlyRounded) {
  if (!ctx().exact_fma()) GTEST_SKIP() << "correct rounding is built from an exact fma";
  // Divisors up to 2^127 (beyond the range where the approximate reciprocal is specified).
  const auto a = spread_values(4096, 4, -60, 60, false), b = spread_values(4096, 5, -126, 127, false);
  const auto got_div = run_probe(ctx(), kDiv, a, b, a);
  std::vector<float> expected_div(a.size());
  for (size_t i = 0; i < a.size(); ++i) expected_div[i] = a[i] / b[i];
  // Quotients that land in the subnormal range are outside the contract; compare the others
  // (overflows to infinity included).
  std::vector<float> got_normal, expected_normal;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::fabs(expected_div[i]) < 1.2e-38f) continue;
    got_normal.push_back(got_div[i]);
    expected_normal.push_back(expected_div[i]);
  }
  EXPECT_GT(got_normal.size(), a.size() / 2);
  EXPECT_EQ(test::first_bit_difference(got_normal, expected_normal), -1);

  auto x = spread_values(4096, 6, -125, 127, true);
  x[0] = 0.0f;
  x[1] = 4.0f;
  x[2] = 2.0f;
  const auto got_sqrt = run_probe(ctx(), kSqrt, x, x, x);
  std::vector<float> expected_sqrt(x.size());
  for (size_t i = 0; i < x.size(); ++i) expected_sqrt[i] = std::sqrt(x[i]);
  EXPECT_EQ(test::first_bit_difference(got_sqrt, expected_sqrt), -1);
}

TEST_F(VulkanMath, ElementaryFunctionsEqualTheCpuBitForBit) {
  std::vector<float> x;
  for (float v = -95.0f; v < 95.0f; v += 0.0173f) x.push_back(v);
  for (float v : test::random_floats(2000, 7, 3.0f)) x.push_back(v);
  x.push_back(0.0f);
  x.push_back(-0.0f);
  x.push_back(20.0f);
  x.push_back(1e-30f);
  struct Case {
    Function function;
    float (*cpu)(float);
    const char* name;
  };
  for (const Case& c : {Case{kExp, exp_f32, "exp"}, Case{kSoftplus, softplus_f32, "softplus"},
                        Case{kSilu, silu_f32, "silu"}}) {
    SCOPED_TRACE(c.name);
    const auto got = run_probe(ctx(), c.function, x, x, x);
    std::vector<float> expected(x.size());
    std::vector<double> reference(x.size());
    for (size_t i = 0; i < x.size(); ++i) {
      expected[i] = c.cpu(x[i]);
      const double v = x[i];
      reference[i] = c.function == kExp    ? std::exp(std::min(v, 88.3))
                     : c.function == kSilu ? v / (1 + std::exp(-v))
                     : v > 20              ? v
                                           : std::log1p(std::exp(v));
    }
    // Tier 2 holds on every device; tier 1 needs the exact fma.
    EXPECT_LE(test::nmse(got, reference), 1e-7);
    if (ctx().exact_fma()) {
      const long diff = test::first_bit_difference(got, expected);
      EXPECT_EQ(diff, -1) << "x = " << (diff >= 0 ? x[diff] : 0) << " gpu " << (diff >= 0 ? got[diff] : 0)
                          << " cpu " << (diff >= 0 ? expected[diff] : 0);
    }
  }
}

}  // namespace
}  // namespace mb::vulkan_math_test

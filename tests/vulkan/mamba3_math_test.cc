// SPDX-License-Identifier: MIT
// Mamba-3's shader arithmetic (shaders/mb_mamba3.glsl) against the CPU's: the RoPE phase step,
// which the CPU computes in double precision, bit for bit, near the integers of acc / 2 pi too
// (where a quotient rounded the other way would wrap by a whole turn); tanh and sin/cos against
// double references (their CPU bits are checked through the registry's mamba3_scan cases).
#include <cmath>
#include <random>

#include "common/test_util.h"
#include "vulkan/vulkan_test_util.h"

// A namespace of its own: the test binary compiles its files in batches (a unity build).
namespace mb::vulkan_mamba3_math_test {
namespace {

using vulkan::Buffer;

enum Function : uint32_t { kAngleStep = 0, kTanh, kSin, kCos };

std::vector<float> run_probe(vulkan::Context& ctx, Function function, const std::vector<float>& a,
                             const std::vector<float>& b, const std::vector<float>& c) {
  const uint32_t count = static_cast<uint32_t>(a.size());
  Buffer in_a = Buffer::from_floats(ctx, a), in_b = Buffer::from_floats(ctx, b),
         in_c = Buffer::from_floats(ctx, c);
  Buffer out(ctx, count * sizeof(float));
  const vulkan::KernelSpec spec{"mamba3_probe", 4, 8, {}};
  const struct { uint32_t count, function; } push{count, function};
  vulkan::CommandSequence sequence(ctx, 1);
  sequence.begin();
  const Buffer* buffers[] = {&in_a, &in_b, &in_c, &out};
  sequence.dispatch(spec, buffers, &push, sizeof push, {(count + 63) / 64, 1, 1}, "mamba3 probe");
  sequence.end();
  sequence.run();
  return out.to_floats();
}

// The CPU's phase step (mamba3_kernels.inc's head_kq).
float cpu_angle_step(float angle, float omega, float dt) {
  constexpr double kTwoPi = 6.28318530717958647692;
  double acc = static_cast<double>(angle) + static_cast<double>(omega * dt);
  acc -= kTwoPi * std::floor(acc / kTwoPi);
  return static_cast<float>(acc);
}

class VulkanMamba3Math : public test::VulkanTest {
 protected:
  void SetUp() override {
    test::VulkanTest::SetUp();
    if (IsSkipped()) return;
    if (!ctx().info().float64) GTEST_SKIP() << "this device lacks shaderFloat64";
  }
};

TEST_F(VulkanMamba3Math, ThePhaseStepEqualsTheCpusNearEveryTurn) {
  std::vector<float> angle, omega, dt;
  auto add = [&](float a, float o, float d) {
    angle.push_back(a);
    omega.push_back(o);
    dt.push_back(d);
  };
  // Sums within a few ulps of 0, +-2 pi and 4 pi: the angle's float neighbours of a whole turn and
  // the velocities whose products land at either side of the turn's double.
  constexpr double kTwoPi = 6.28318530717958647692;
  for (int turns : {-1, 0, 1, 2}) {
    for (float a : {0.0f, 1e-30f, 3.1415927f, static_cast<float>(kTwoPi),
                    std::nextafter(static_cast<float>(kTwoPi), 0.0f),
                    std::nextafter(static_cast<float>(kTwoPi), 7.0f)}) {
      const float centre = static_cast<float>(turns * kTwoPi - double(a));
      float o = centre;
      for (int step = 0; step < 6; ++step) o = std::nextafter(o, -1e30f);
      for (int step = 0; step < 12; ++step, o = std::nextafter(o, 1e30f)) {
        add(a, o, 1.0f);
        add(a, o * 0.5f, 2.0f);  // the same product through a rounding multiply
      }
    }
  }
  // Ordinary steps.
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> phase(0.0f, 6.2831855f), velocity(-3.1415927f, 3.1415927f),
      step(0.0f, 2.0f);
  for (int i = 0; i < 4000; ++i) add(phase(rng), velocity(rng), step(rng));
  add(-0.0f, -0.0f, 1.0f);
  add(0.0f, -0.0f, 1.0f);
  const auto got = run_probe(ctx(), kAngleStep, angle, omega, dt);
  std::vector<float> expected(angle.size());
  for (size_t i = 0; i < angle.size(); ++i) expected[i] = cpu_angle_step(angle[i], omega[i], dt[i]);
  const long diff = test::first_bit_difference(got, expected);
  EXPECT_EQ(diff, -1) << "angle " << (diff >= 0 ? angle[diff] : 0) << " omega "
                      << (diff >= 0 ? omega[diff] : 0) << " dt " << (diff >= 0 ? dt[diff] : 0) << ": gpu "
                      << (diff >= 0 ? got[diff] : 0) << " cpu " << (diff >= 0 ? expected[diff] : 0);
}

TEST_F(VulkanMamba3Math, TanhAndSinCosAreWithinAFewUlpsOfDoublePrecision) {
  std::vector<float> x;
  for (float v = -9.0f; v < 9.0f; v += 0.00731f) x.push_back(v);
  x.push_back(0.0f);
  x.push_back(0.625f);
  x.push_back(-0.625f);
  std::vector<float> phases;
  for (float v = -3.2f; v < 9.5f; v += 0.00517f) phases.push_back(v);
  struct Case {
    Function function;
    const std::vector<float>* inputs;
    double (*reference)(double);
  };
  for (const Case& c : {Case{kTanh, &x, [](double v) { return std::tanh(v); }},
                        Case{kSin, &phases, [](double v) { return std::sin(v); }},
                        Case{kCos, &phases, [](double v) { return std::cos(v); }}}) {
    const auto got = run_probe(ctx(), c.function, *c.inputs, *c.inputs, *c.inputs);
    double worst = 0.0;
    for (size_t i = 0; i < got.size(); ++i)
      worst = std::max(worst, std::fabs(double(got[i]) - c.reference((*c.inputs)[i])));
    EXPECT_LE(worst, 4e-7) << "function " << c.function;
  }
}

}  // namespace
}  // namespace mb::vulkan_mamba3_math_test

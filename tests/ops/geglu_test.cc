// SPDX-License-Identifier: MIT
// Zamba2's GeGLU (ops/ffn.h's glu with Activation::GeluErf): the exact GELU of the gate times the
// up value, on every instruction set, against erfc in double. The op registry compares it with the
// double reference in NMSE and across instruction sets and threads bit for bit; this checks each
// value's relative error over the whole range, where erf saturates and the negative side's tiny
// products, and that the tanh approximation (a 3e-4 error on Zamba2 logits) is not what runs.
#include <gtest/gtest.h>

#include <cmath>
#include <numbers>
#include <vector>

#include "core/threading.h"
#include "ops/ffn.h"

namespace mb {
namespace {

double gelu_erf_exact(double x) {
  return 0.5 * x * std::erfc(-x / std::numbers::sqrt2);
}

std::vector<float> geglu_of(Isa isa, const std::vector<float>& gate, float up) {
  const int64_t width = static_cast<int64_t>(gate.size());
  std::vector<float> x(2 * gate.size(), up), y(gate.size(), 0.0f);
  std::copy(gate.begin(), gate.end(), x.begin());
  glu(ComputeContext{1, isa}, {x.data(), 2 * width, 1, width, Activation::GeluErf, y.data(), width});
  return y;
}

TEST(GeGlu, ExactGeluTimesUpOnEveryInstructionSet) {
  std::vector<float> gate;
  for (float v = -14.0f; v < 14.0f; v += 0.0137f) gate.push_back(v);
  gate.push_back(0.0f);
  gate.push_back(1e-20f);
  gate.push_back(-1e-20f);
  for (Isa isa : {Isa::Scalar, Isa::Avx2, Isa::Avx512, Isa::Neon}) {
    if (!isa_supported(isa)) continue;
    const std::vector<float> y = geglu_of(isa, gate, -1.5f);
    for (size_t i = 0; i < gate.size(); ++i) {
      const double want = -1.5 * gelu_erf_exact(gate[i]);
      // In the far negative tail erfc's exp(-z^2) takes f32's relative error of z^2 (~1e-6 at
      // x = -6, 1e-5 at -13, on values below 1e-8), and beyond x = -13 exp_v's clamp at e^-87.3
      // leaves ~2e-38 where the value is smaller still.
      const double relative = gate[i] < -5.0f ? 2e-5 : 2e-6;
      EXPECT_NEAR(y[i], want, relative * std::fabs(want) + 1e-37) << isa_name(isa) << " x = " << gate[i];
    }
  }
  // The tanh form is 1e-4 off at x = -2, far outside the tolerance above.
  const float x = -2.0f;
  const double tanh_form = 0.5 * x * (1.0 + std::tanh(0.7978845608 * (x + 0.044715 * x * x * x)));
  EXPECT_GT(std::fabs(geglu_of(best_isa(), {x}, 1.0f)[0] - tanh_form), 5e-5);
  EXPECT_TRUE(std::isnan(geglu_of(best_isa(), {NAN}, 1.0f)[0]));
  EXPECT_EQ(geglu_of(best_isa(), {INFINITY}, 1.0f)[0], INFINITY);
}

}  // namespace
}  // namespace mb

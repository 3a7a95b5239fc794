// SPDX-License-Identifier: MIT
// The scalar entry points of the activations every kernel shares (ops/activations.h: the
// polynomials of vec16_math.inc) against libm in double. The kernels themselves are checked
// against their references, on every instruction set and thread count, by the op registry
// (backend_ops_test.cc).
#include <gtest/gtest.h>

#include <cmath>

#include "ops/activations.h"

namespace mb {
namespace {

TEST(Activations, ScalarEntryPointsMatchLibm) {
  for (float x = -80.0f; x < 80.0f; x += 0.37f) {
    EXPECT_NEAR(exp_f32(x), std::exp(double(x)), 3e-7 * std::exp(double(x))) << x;
    const double softplus = x > 20 ? x : std::log1p(std::exp(double(x)));
    EXPECT_NEAR(softplus_f32(x), softplus, 4e-7 * softplus + 1e-38) << x;
    const double silu = x / (1.0 + std::exp(-double(x)));
    EXPECT_NEAR(silu_f32(x), silu, 4e-7 * std::fabs(silu) + 1e-37) << x;
  }
  EXPECT_TRUE(std::isnan(exp_f32(NAN)));
}

}  // namespace
}  // namespace mb

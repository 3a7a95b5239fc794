// SPDX-License-Identifier: MIT
// The grouped gated RMSNorm of Mamba-2 (ops/gated_rms_norm.h) normalizes each group on its own,
// the semantics its reference shares with the kernel (a whole-row norm is a known bug of some
// ports). The Mamba-2 scan and the gated norm against their double references, on every
// instruction set and thread count, are cases of the op registry (tests/ops/backend_ops_test.cc).
#include <gtest/gtest.h>

#include <vector>

#include "ops/gated_rms_norm.h"

namespace mb {
namespace {

TEST(GatedRmsNorm, EachGroupIsNormalizedOnItsOwn) {
  // Two groups of very different scale: a whole-row norm would leave the small group small.
  const int64_t dim = 32;
  std::vector<float> y(dim), z(dim, 30.0f), weight(dim, 1.0f), out(dim);
  for (int64_t k = 0; k < dim; ++k) y[k] = k < 16 ? 100.0f : 0.01f;
  GatedRmsNormArgs args{y.data(), dim, z.data(), dim, 1, dim, 16, weight.data(), 1e-5f, out.data(), dim};
  gated_rms_norm(ComputeContext{1, best_isa()}, args);
  for (int64_t k = 0; k < dim; ++k) EXPECT_NEAR(out[k], 1.0f, 1e-3) << k;
  // The reference agrees.
  gated_rms_norm_reference(args);
  for (int64_t k = 0; k < dim; ++k) EXPECT_NEAR(out[k], 1.0f, 1e-3) << k;
}

}  // namespace
}  // namespace mb

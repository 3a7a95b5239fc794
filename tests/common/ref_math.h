// SPDX-License-Identifier: MIT
// The activations of the double-precision model references, as the modeling code writes them.
#pragma once

#include <cmath>

namespace mb::test {

inline double silu(double x) {
  return x / (1.0 + std::exp(-x));
}
// Above 20, log(1 + e^x) equals x in double precision, as torch's softplus threshold has it.
inline double softplus(double x) {
  return x > 20 ? x : std::log1p(std::exp(x));
}

}  // namespace mb::test

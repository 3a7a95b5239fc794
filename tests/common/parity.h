// SPDX-License-Identifier: MIT
// Shared pieces of the parity suites, which compare engine logits with a double-precision
// reference model (tests/common/mamba{1,2,3}_reference): the case description and the error
// measure.
#pragma once

#include <algorithm>
#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include "model/make_model.h"

namespace mb::test {

struct ParityCase {
  std::string name;
  MakeModelOptions options;
  std::optional<DType> load_dtype;  // engine storage; empty = as stored
};

// The worst over positions t of max_v |expected[t][v] - got[t * V + v]| / max_v |expected[t][v]|.
inline double worst_step_ratio(const std::vector<std::vector<double>>& expected,
                               const std::vector<float>& got, int64_t V) {
  double worst = 0;
  for (size_t t = 0; t < expected.size(); ++t) {
    double max_logit = 0, max_diff = 0;
    for (int64_t v = 0; v < V; ++v) {
      max_logit = std::max(max_logit, std::fabs(expected[t][v]));
      max_diff = std::max(max_diff, std::fabs(expected[t][v] - got[t * V + v]));
    }
    worst = std::max(worst, max_diff / max_logit);
  }
  return worst;
}

}  // namespace mb::test

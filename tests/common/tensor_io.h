// SPDX-License-Identifier: MIT
// Checkpoint helpers shared by the references and the malformed-checkpoint tests.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "io/safetensors.h"

namespace mb::test {

// A tensor's values in double. When `round_to` is set they are first rounded to that dtype, the
// way an engine storing the tensor in it sees them. Missing tensors give an empty vector unless
// `required`, which throws.
std::vector<double> read_tensor_values(const TensorSet& set, const std::string& name, const DType* round_to,
                                       bool required = false);

// Rewrites `dir`/model.safetensors through `edit`, which may drop, rename or reshape tensors.
void rewrite_tensors(const std::string& dir, const std::function<void(std::vector<StoredTensor>&)>& edit);

}  // namespace mb::test

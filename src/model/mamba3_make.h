// Random Mamba-3 layer tensors for make_model (state-spaces MambaLMHeadModel names and shapes).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model/config.h"

namespace mb {

struct GeneratedTensor {
  std::string name;
  std::vector<int64_t> shape;
  std::vector<float> values;
  bool keep_f32;  // per-head parameters kept in f32 whatever the checkpoint dtype
};

// Every backbone.layers.{i}.* tensor of a Mamba-3 model, drawn from a generator seeded by `seed`.
// The init follows mamba_ssm where it matters for the dynamics (dt_bias = softplus^-1 of a
// log-uniform dt in [1e-3, 1e-1], D = 1, norm weights 1) and scales the projections so
// activations stay O(1); B/C biases are small.
std::vector<GeneratedTensor> make_mamba3_layer_tensors(const ModelConfig& config, uint64_t seed);

}  // namespace mb

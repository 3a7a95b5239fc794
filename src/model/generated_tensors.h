// Random layer tensors of the Mamba-2 and Mamba-3 mixers for make_model, in the checkpoint names
// and shapes of mamba_ssm / Hugging Face.
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

// Every backbone.layers.{i}.* tensor of a Mamba-2 model (the same names in the HF and state-spaces
// layouts). The init follows mamba_ssm's Mamba2: dt_bias = softplus^-1 of a log-uniform dt in
// [1e-3, 1e-1], A_log = log of a uniform A in [1, 16], D = 1; the gated-norm weights are drawn
// around 1, so a norm applied to the wrong channels shows in the outputs.
std::vector<GeneratedTensor> make_mamba2_layer_tensors(const ModelConfig& config, uint64_t seed);

}  // namespace mb

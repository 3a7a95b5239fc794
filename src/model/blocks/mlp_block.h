// SPDX-License-Identifier: MIT
// The MLP of the hybrids: RMSNorm, the up product, the activation of ops/ffn.h and the down
// product added to the residual stream (scaled by the residual multiplier where the config has
// one). Granite-4.0-H's shared MLP is SwiGLU with one fused gate | up matrix (`input_linear`:
// rows [0, W) the gate, [W, 2W) up), Bamba's as two matrices (gate_proj, up_proj); Nemotron-H's
// `-` layers are ReLU^2 without a gate.
#pragma once

#include <vector>

#include "model/blocks/block.h"

namespace mb {

class MlpBlock final : public Block {
 public:
  MlpBlock(const ModelConfig& config, const BlockSpec& spec, WeightBinder& binder);

  // The tensors of the block, indexed by Tensor.
  static std::vector<TensorSpec> schema(const ModelConfig& config, const BlockSpec& block);
  enum Tensor : size_t {
    kNorm,    // [d_model]
    kUp,      // [2 W, d_model] (SwiGLU: gate | up) or [W, d_model]
    kUpBias,  // [up rows] or absent
    kDown,    // [d_model, W]
    kDownBias,
    kGate,      // [W, d_model]: a separate gate_proj (MlpConfig::separate_gate; kUp is then [W, d_model])
    kGateBias,  // [W] or absent
    kTensors,
  };

  std::vector<StatePart> state_parts() const override { return {}; }
  std::vector<int64_t> scratch_widths() const override;
  std::span<const std::string_view> phase_names() const override;
  std::vector<OpQuery> ops() const override;
  void forward(LayerContext& ctx) const override;

 private:
  int64_t d_model_, width_, up_rows_;
  Activation activation_;
  bool separate_gate_;
  float norm_eps_, residual_multiplier_;
};

}  // namespace mb

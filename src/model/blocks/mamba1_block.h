// SPDX-License-Identifier: MIT
// The Mamba-1 mixer (the selective-scan block of mamba_ssm / HF MambaForCausalLM), with
// FalconMamba's weightless RMSNorm on x_proj's three outputs (HF FalconMambaForCausalLM) when
// the config asks for it, or Jamba's weighted one (dt_layernorm, b_layernorm, c_layernorm of HF
// JambaMambaMixer).
//
// Per round: in_proj with the layer's RMSNorm in front, the causal conv + SiLU of x with carried
// history, x_proj into [dt_low | B | C] (FalconMamba: each normalized), the selective scan with
// dt_proj + softplus, the D skip and the SiLU(z) gate, out_proj added to the residual stream.
#pragma once

#include <vector>

#include "model/blocks/block.h"

namespace mb {

class Mamba1Block final : public Block {
 public:
  Mamba1Block(const ModelConfig& config, const BlockSpec& spec, WeightBinder& binder);

  // The tensors of layer `layer`, indexed by Tensor.
  static std::vector<TensorSpec> schema(const ModelConfig& config, const BlockSpec& block);
  enum Tensor : size_t {
    kNorm,         // [d_model]
    kInProj,       // [2 * d_inner, d_model]: rows 0..D-1 give x, D..2D-1 give z
    kInProjBias,   // [2 * d_inner] or absent
    kConv,         // [d_inner, 1, K], bound tap-major [K, d_inner]
    kConvBias,     // [d_inner] or absent
    kXProj,        // [dt_rank + 2 * d_state, d_inner]: [dt_low | B | C]
    kDtProj,       // [d_inner, dt_rank]
    kDtBias,       // [d_inner]
    kALog,         // [d_inner, d_state] (GGUF: A itself)
    kD,            // [d_inner]
    kOutProj,      // [d_model, d_inner]
    kOutProjBias,  // [d_model] or absent
    kDtNorm,       // [dt_rank] (Jamba) or absent
    kBNorm,        // [d_state] (Jamba) or absent
    kCNorm,        // [d_state] (Jamba) or absent
    kTensors,
    // Derived at load:
    kABase2 = kTensors,  // [d_state, d_inner] = A * log2(e), state-major
    kMixerNormOnes,      // [max(dt_rank, d_state)] ones: FalconMamba's weightless norm
  };

  // The parts of the block's state, in this order: conv history [d_conv - 1, d_inner] (oldest
  // first), then SSM state [d_state, d_inner].
  std::vector<StatePart> state_parts() const override;
  std::vector<int64_t> scratch_widths() const override;
  std::span<const std::string_view> phase_names() const override;
  std::vector<OpQuery> ops() const override;
  void forward(LayerContext& ctx) const override;

 private:
  int64_t d_model_, d_inner_, d_state_, dt_rank_, d_conv_;
  float norm_eps_;
  bool mixer_norm_, mixer_norm_weights_;
  float mixer_norm_eps_;
};

}  // namespace mb

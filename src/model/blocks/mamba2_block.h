// SPDX-License-Identifier: MIT
// The Mamba-2 mixer (the Mamba2 mixer of mamba_ssm, HF Mamba2ForCausalLM).
//
// Per round: in_proj with the layer's RMSNorm in front, giving z | xBC | dt; the causal conv +
// SiLU over xBC with carried history; the per-head SSM of ops/mamba2_scan.h; the grouped gated
// RMSNorm of ops/gated_rms_norm.h; out_proj added to the residual stream.
#pragma once

#include <vector>

#include "model/blocks/block.h"

namespace mb {

class Mamba2Block final : public Block {
 public:
  Mamba2Block(const ModelConfig& config, const BlockSpec& spec, WeightBinder& binder);

  // The tensors of layer `layer`, indexed by Tensor.
  static std::vector<TensorSpec> schema(const ModelConfig& config, const BlockSpec& block);
  enum Tensor : size_t {
    kNorm,         // [d_model]
    kInProj,       // [2 d_inner + 2 G N + H, d_model]: rows z | x | B | C | dt
    kInProjBias,   // [in_proj rows] or absent
    kConv,         // [conv_width, 1, K], bound tap-major
    kConvBias,     // [conv_width] or absent
    kDtBias,       // [H]
    kALog,         // [H] (GGUF: A itself)
    kD,            // [H], or [d_inner] in checkpoints made with D_has_hdim
    kGateNorm,     // [d_inner] gated RMSNorm weight, absent for y * silu(z)
    kOutProj,      // [d_model, d_inner]
    kOutProjBias,  // [d_model] or absent
    kTensors,
    // Derived at load:
    kA = kTensors,  // [H] = A = -exp(A_log), for the chunked form
    kABase2,        // [H] = A * log2(e), for the sequential form
  };

  static int64_t conv_width(const ModelConfig& c) {
    return c.ssm.d_inner + 2 * c.ssm.ngroups * c.ssm.d_state;
  }
  static int64_t in_proj_rows(const ModelConfig& c) {
    return c.ssm.d_inner + conv_width(c) + c.ssm.n_heads();
  }

  // The parts of the block's state, in this order: conv history [d_conv - 1, conv_width]
  // (oldest first), then SSM state [H, N, P].
  std::vector<StatePart> state_parts() const override;
  std::vector<int64_t> scratch_widths() const override;
  std::span<const std::string_view> phase_names() const override;
  std::vector<OpQuery> ops() const override;
  void forward(LayerContext& ctx) const override;

 private:
  int64_t d_model_, d_inner_, d_state_, d_conv_, headdim_, n_heads_, n_groups_, conv_width_, in_proj_rows_;
  int64_t chunk_;
  float norm_eps_, dt_min_, dt_max_;
  float residual_multiplier_;  // 1 but in Granite-4.0-H
  bool d_per_channel_;
};

}  // namespace mb

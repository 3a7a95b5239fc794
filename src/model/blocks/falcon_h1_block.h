// SPDX-License-Identifier: MIT
// Falcon-H1's two blocks per layer (../shared/specs/hybrids.md, section 4.4; transformers'
// FalconH1DecoderLayer), with every muP multiplier applied at run time:
//
//   FalconH1MixerBlock: one RMSNorm (input_layernorm) feeding, in parallel,
//     - the Mamba-2 mixer of Mamba2Block's ops on x * ssm_in, its in_proj output's five segments
//       (z, x, B, C, dt) each scaled by its ssm_multipliers entry, y * silu(z) or the grouped
//       gated RMSNorm (norm before or after the gate), out_proj, times ssm_out;
//     - attention of AttentionBlock's ops on x * attention_in, keys times key_multiplier before
//       RoPE, o_proj, times attention_out;
//     then residual += (mamba + attention), in that order of additions, as the reference does.
//   FalconH1MlpBlock: RMSNorm (pre_ff_layernorm), the gate and up products (separate tensors),
//     the gate times mlp_multipliers[0], SwiGLU, the down product times mlp_multipliers[1] added
//     to the residual.
//
// The two branches' tensors are Mamba2Block's and AttentionBlock's schemas under the layer's
// "mamba." and "self_attn." modules (their own norms left out), so a tensor is still named once.
#pragma once

#include <vector>

#include "model/blocks/block.h"

namespace mb {

class FalconH1MixerBlock final : public Block {
 public:
  FalconH1MixerBlock(const ModelConfig& config, const BlockSpec& spec, WeightBinder& binder);

  // input_layernorm, then the Mamba-2 mixer's tensors (Mamba2Block::Tensor after its norm), then
  // the attention's (AttentionBlock::Tensor after its norm).
  static std::vector<TensorSpec> schema(const ModelConfig& config, const BlockSpec& block);

  // conv history [d_conv - 1, conv width] and SSM state [H, N, P] (fixed), then keys and values
  // [n_kv_heads, head_dim] per position (growing).
  std::vector<StatePart> state_parts() const override;
  std::vector<int64_t> scratch_widths() const override;
  std::span<const std::string_view> phase_names() const override;
  std::vector<OpQuery> ops() const override;
  void forward(LayerContext& ctx) const override;

 private:
  void mamba_branch(const LayerContext& ctx) const;
  void gate(const LayerContext& ctx) const;
  void attention_branch(const LayerContext& ctx) const;

  int64_t d_model_, d_inner_, d_state_, d_conv_, headdim_, n_heads_, n_groups_, conv_width_, in_proj_rows_;
  int64_t chunk_;
  int64_t attn_heads_, kv_heads_, head_dim_;
  float norm_eps_, dt_min_, dt_max_, attn_scale_;
  double rope_theta_;
  bool d_per_channel_, rms_norm_, norm_before_gate_;
  float ssm_in_, ssm_out_, attention_in_, attention_out_, key_;
  float segment_multipliers_[5];
};

class FalconH1MlpBlock final : public Block {
 public:
  FalconH1MlpBlock(const ModelConfig& config, const BlockSpec& spec, WeightBinder& binder);

  static std::vector<TensorSpec> schema(const ModelConfig& config, const BlockSpec& block);
  enum Tensor : size_t {
    kNorm,      // [d_model] pre_ff_layernorm
    kGate,      // [width, d_model]
    kGateBias,  // [width] or absent
    kUp,        // [width, d_model]
    kUpBias,
    kDown,  // [d_model, width]
    kDownBias,
    kTensors,
  };

  std::vector<StatePart> state_parts() const override { return {}; }
  std::vector<int64_t> scratch_widths() const override;
  std::span<const std::string_view> phase_names() const override;
  std::vector<OpQuery> ops() const override;
  void forward(LayerContext& ctx) const override;

 private:
  int64_t d_model_, width_;
  float norm_eps_, gate_multiplier_, down_multiplier_;
};

}  // namespace mb

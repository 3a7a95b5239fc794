// SPDX-License-Identifier: MIT
// The blocks of LiquidAI's LFM2 and LFM2-MoE (../shared/specs/hybrids-2.md section 2.4). Each
// layer is an operator (a gated short convolution or attention) on operator_norm, then a
// feed-forward block (SwiGLU, or LFM2-MoE's experts) on ffn_norm, each added to the residual:
//   ShortConvBlock:     in_proj -> B | C | x; y = C * causal_conv(B * x) (ops/short_conv.h); out_proj
//   Lfm2AttentionBlock: q, k, v; per-head RMSNorm of q and k (q_layernorm, k_layernorm), THEN NeoX
//                       RoPE; GQA attention scaled by head_dim^-0.5; out_proj
//   Lfm2MlpBlock:       w2(silu(w1 x) * w3 x), w1 and w3 separate matrices
//   Lfm2MoeBlock:       sigmoid router scores, top-k of score + expert_bias (the bias steers the
//                       choice only), weights renormalized with + 1e-6 and scaled by
//                       routed_scaling_factor, SwiGLU experts (ops/moe.h)
#pragma once

#include <vector>

#include "model/blocks/block.h"
#include "ops/moe.h"

namespace mb {

class ShortConvBlock final : public Block {
 public:
  ShortConvBlock(const ModelConfig& config, const BlockSpec& spec, WeightBinder& binder);
  static std::vector<TensorSpec> schema(const ModelConfig& config, const BlockSpec& block);
  enum Tensor : size_t {
    kNorm,     // [d_model]: operator_norm
    kInProj,   // [3 d_model, d_model]: rows B, C, x
    kConv,     // [d_model, 1, K], bound tap-major [K, d_model]
    kOutProj,  // [d_model, d_model]
    kTensors,
  };
  // One fixed part: "conv", the last K - 1 values of B * x, [K - 1, d_model].
  std::vector<StatePart> state_parts() const override;
  std::vector<int64_t> scratch_widths() const override;
  std::span<const std::string_view> phase_names() const override;
  std::vector<OpQuery> ops() const override;
  void forward(LayerContext& ctx) const override;

 private:
  int64_t d_model_, kernel_;
  float norm_eps_;
};

class Lfm2AttentionBlock final : public Block {
 public:
  Lfm2AttentionBlock(const ModelConfig& config, const BlockSpec& spec, WeightBinder& binder);
  static std::vector<TensorSpec> schema(const ModelConfig& config, const BlockSpec& block);
  enum Tensor : size_t {
    kNorm,   // [d_model]: operator_norm
    kQ,      // [n_heads * head_dim, d_model]
    kK,      // [n_kv_heads * head_dim, d_model]
    kV,      // [n_kv_heads * head_dim, d_model]
    kO,      // [d_model, n_heads * head_dim]: out_proj
    kQNorm,  // [head_dim]: q_layernorm, shared by every head
    kKNorm,  // [head_dim]: k_layernorm
    kTensors,
  };
  // Two growing parts: the keys (normalized and rotated) and the values.
  std::vector<StatePart> state_parts() const override;
  std::vector<int64_t> scratch_widths() const override;
  std::span<const std::string_view> phase_names() const override;
  std::vector<OpQuery> ops() const override;
  void forward(LayerContext& ctx) const override;

 private:
  // RMSNorm of each of the `heads` heads of x's rows, in place.
  void norm_heads(const LayerContext& ctx, View x, int64_t heads, View weight) const;

  int64_t d_model_, n_heads_, n_kv_heads_, head_dim_;
  float scale_;
  double rope_theta_;
  float norm_eps_;
};

class Lfm2MlpBlock final : public Block {
 public:
  Lfm2MlpBlock(const ModelConfig& config, const BlockSpec& spec, WeightBinder& binder);
  static std::vector<TensorSpec> schema(const ModelConfig& config, const BlockSpec& block);
  enum Tensor : size_t {
    kNorm,  // [d_model]: ffn_norm
    kW1,    // [W, d_model]: the gate
    kW3,    // [W, d_model]: up
    kW2,    // [d_model, W]: down
    kTensors,
  };
  std::vector<StatePart> state_parts() const override { return {}; }
  std::vector<int64_t> scratch_widths() const override;
  std::span<const std::string_view> phase_names() const override;
  std::vector<OpQuery> ops() const override;
  void forward(LayerContext& ctx) const override;

 private:
  int64_t d_model_, width_;
  float norm_eps_;
};

class Lfm2MoeBlock final : public Block {
 public:
  Lfm2MoeBlock(const ModelConfig& config, const BlockSpec& spec, WeightBinder& binder);
  static std::vector<TensorSpec> schema(const ModelConfig& config, const BlockSpec& block);
  enum Tensor : size_t {
    kNorm,         // [d_model]: ffn_norm
    kRouter,       // [E, d_model]: gate, f32
    kExpertBias,   // [E]: expert_bias, f32
    kExpertsUp,    // [E, 2 W, d_model]: gate_up_proj (w1 | w3 per expert)
    kExpertsDown,  // [E, d_model, W]: down_proj (w2)
    kTensors,
  };
  std::vector<StatePart> state_parts() const override { return {}; }
  std::vector<int64_t> scratch_widths() const override;
  std::span<const std::string_view> phase_names() const override;
  std::vector<OpQuery> ops() const override;
  size_t step_matrix_bytes() const override;
  void forward(LayerContext& ctx) const override;

 private:
  MoeParams params_;
  float norm_eps_;
};

}  // namespace mb

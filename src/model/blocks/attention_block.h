// SPDX-License-Identifier: MIT
// Causal self-attention with a KV cache (the attention layers of Granite-4.0-H and Nemotron-H):
// RMSNorm, the q/k/v products, the round's keys and values appended to the state's two growing
// parts, ops/attention.h over every position so far, and o_proj added to the residual stream
// (scaled by the residual multiplier where the config has one). Grouped-query heads, a head size
// of its own (not necessarily hidden / heads), a configured score scale, and either no positional
// encoding (the hybrids) or RoPE on q and k (ops/rope.h: the all-attention Granite-4.0 models).
#pragma once

#include <vector>

#include "model/blocks/block.h"

namespace mb {

class AttentionBlock final : public Block {
 public:
  AttentionBlock(const ModelConfig& config, const BlockSpec& spec, WeightBinder& binder);

  // The tensors of the block, indexed by Tensor.
  static std::vector<TensorSpec> schema(const ModelConfig& config, const BlockSpec& block);
  enum Tensor : size_t {
    kNorm,   // [d_model]
    kQ,      // [n_heads * head_dim, d_model]
    kQBias,  // [n_heads * head_dim] or absent
    kK,      // [n_kv_heads * head_dim, d_model]
    kKBias,
    kV,  // [n_kv_heads * head_dim, d_model]
    kVBias,
    kO,  // [d_model, n_heads * head_dim]
    kOBias,
    kTensors,
  };

  // Two growing parts: the keys and the values, [n_kv_heads, head_dim] per position.
  std::vector<StatePart> state_parts() const override;
  std::vector<int64_t> scratch_widths() const override;
  std::span<const std::string_view> phase_names() const override;
  std::vector<OpQuery> ops() const override;
  void forward(LayerContext& ctx) const override;

 private:
  int64_t d_model_, n_heads_, n_kv_heads_, head_dim_;
  float scale_;
  double rope_theta_;    // 0: no RoPE
  int64_t rotary_dims_;  // the channels of a head RoPE rotates (the first ones)
  float norm_eps_, residual_multiplier_;
};

}  // namespace mb

// SPDX-License-Identifier: MIT
// Qwen3.5's gated attention (HF Qwen3_5Attention; ../shared/specs/gated-deltanet.md section 4.4),
// on the layer's zero-centred input norm:
//   q_proj emits per head [query hd | gate hd]; its rows are bound as all queries then all gates,
//   so the product's row is q [nh hd] | gate [nh hd]
//   q, k: per-head zero-centred RMSNorm (bound as 1 + w), then partial NeoX RoPE on the first
//   rot = head_dim x partial_rotary_factor channels (the text use of the multi-section RoPE)
//   o = attention over the KV cache (GQA, scale head_dim^-0.5);  h += o_proj(o * sigmoid(gate))
#pragma once

#include <vector>

#include "model/blocks/block.h"

namespace mb {

class GatedAttentionBlock final : public Block {
 public:
  GatedAttentionBlock(const ModelConfig& config, const BlockSpec& spec, WeightBinder& binder);
  static std::vector<TensorSpec> schema(const ModelConfig& config, const BlockSpec& block);
  enum Tensor : size_t {
    kNorm,   // [d_model]: input_layernorm, zero-centred
    kQ,      // [2 n_heads head_dim, d_model]: per head query | gate (bound as queries | gates)
    kK,      // [n_kv_heads head_dim, d_model]
    kV,      // [n_kv_heads head_dim, d_model]
    kO,      // [d_model, n_heads head_dim]
    kQNorm,  // [head_dim], zero-centred, shared by every head
    kKNorm,  // [head_dim], zero-centred
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

  int64_t d_model_, n_heads_, n_kv_heads_, head_dim_, rotary_dims_;
  float scale_;
  double rope_theta_;
  float norm_eps_;
};

}  // namespace mb

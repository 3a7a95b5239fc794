// SPDX-License-Identifier: MIT
// One use of a Zamba2 shared transformer block (../shared/specs/hybrids-2.md section 4.2), the
// first half of a "hybrid" layer i, the j-th hybrid layer, using shared block b = j % mem_blocks:
//
//   u = RMSNorm(concat(hidden, embedding))              [2 d], hidden first, the block's weight
//   q, k, v = W u + B_j (A_j u)                         LoRA iff use_shared_attention_adapter
//   q, k = RoPE(q, k)                                   iff use_mem_rope (NeoX, whole head)
//   a = o_proj(attention(q, k, v))                      scale (head_dim / 2)^-0.5, own KV cache
//   g | p = gate_up(n) + B_j (A_j n), n = RMSNorm(a)    the MLP adapter is always there
//   t = linear_i(down_proj(gelu(g) * p))
//   LayerContext::mixer_input = hidden + t
//
// The layer's Mamba-2 mixer (the next block) then adds Mamba2(RMSNorm(hidden + t)) to hidden:
// the transformer's output reaches the residual stream only through the mixer's input, and the
// block itself has no residual. The shared block's weights (norms, q/k/v/o, gate_up, down) are
// named under the first hybrid layer that uses it, listed in that use's schema only and bound
// once (WeightBinder hands every later use the same packed matrices); each use has its own
// adapters (named by j under the same layer, as HF's adapter lists are), linear and KV cache.
#pragma once

#include <vector>

#include "model/blocks/block.h"

namespace mb {

class Zamba2SharedBlock final : public Block {
 public:
  Zamba2SharedBlock(const ModelConfig& config, const BlockSpec& spec, WeightBinder& binder);

  // The tensors of the use at spec.layer: its own, after the shared block's where it is the
  // block's first use (make-model and GGUF files list each tensor once).
  static std::vector<TensorSpec> schema(const ModelConfig& config, const BlockSpec& block);
  // Every tensor the use binds, indexed by Tensor.
  static std::vector<TensorSpec> all_tensors(const ModelConfig& config, const BlockSpec& block);
  enum Tensor : size_t {
    // The shared block's (under its first use's layer).
    kInNorm,  // [2 d]
    kQ,       // [n_heads hd, 2 d]
    kK,       // [n_kv_heads hd, 2 d]
    kV,       // [n_kv_heads hd, 2 d]
    kO,       // [d, n_heads hd]
    kFfNorm,  // [d]
    kGateUp,  // [2 I, d]: gate rows, then up rows
    kDown,    // [d, I]
    kShared,
    // This use's.
    kQA = kShared,  // [r, 2 d] (attention adapters: absent without use_shared_attention_adapter)
    kQB,            // [n_heads hd, r]
    kKA,
    kKB,
    kVA,
    kVB,
    kMlpA,    // [r, d]
    kMlpB,    // [2 I, r]
    kLinear,  // [d, d]: the layer's linear into its mixer's input
    kTensors,
  };

  // Two growing parts: this use's keys and values, [n_kv_heads, head_dim] per position.
  std::vector<StatePart> state_parts() const override;
  std::vector<int64_t> scratch_widths() const override;
  std::span<const std::string_view> phase_names() const override;
  std::vector<OpQuery> ops() const override;
  void forward(LayerContext& ctx) const override;
  bool reads_embedding() const override { return true; }

 private:
  // q (or k, v) = W u (+ B (A u)).
  void project(const LayerContext& ctx, View u, size_t w, size_t a, View out) const;

  int64_t d_model_, n_heads_, n_kv_heads_, head_dim_, mlp_width_, rank_;
  bool attention_adapter_;
  float scale_, norm_eps_;
  double rope_theta_;  // 0: no RoPE
};

}  // namespace mb

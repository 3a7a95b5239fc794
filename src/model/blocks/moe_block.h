// SPDX-License-Identifier: MIT
// A mixture-of-experts feed-forward block (Granite-4.0-H's MoE layers, Nemotron-H's 'E' layers):
// RMSNorm, an always-on shared MLP, the routed experts of ops/moe.h added to its output, and the
// sum added to the residual stream (scaled by the residual multiplier where the config has one):
//   x = rms_norm(h);  f = shared(x) + moe(x);  h = h + f * residual_multiplier
// Granite: the shared MLP is SwiGLU with a fused gate | up matrix (shared_mlp.input_linear), the
// experts are SwiGLU too (block_sparse_moe.input_linear [E, 2 I, d], each expert's first I rows
// the gate), chosen by the top logits and weighted by a softmax over them. Nemotron-H: the shared
// expert and the experts are ReLU^2 without a gate, the choice is a sigmoid steered by
// e_score_correction_bias, renormalized and scaled by routed_scaling_factor. Nemotron-3-Super's
// LatentMoE (moe_latent_size) runs the routed experts in a narrower space: the router reads x,
// the experts read fc1_latent_proj x, and their weighted sum goes back through fc2_latent_proj:
//   f = shared(x) + fc2(moe(x; fc1 x))
#pragma once

#include <vector>

#include "model/blocks/block.h"

namespace mb {

class MoeBlock final : public Block {
 public:
  MoeBlock(const ModelConfig& config, const BlockSpec& spec, WeightBinder& binder);

  // The tensors of the block, indexed by Tensor.
  static std::vector<TensorSpec> schema(const ModelConfig& config, const BlockSpec& block);
  enum Tensor : size_t {
    kNorm,            // [d_model]
    kSharedUp,        // [shared up rows, d_model] (SwiGLU: gate | up)
    kSharedUpBias,    // [shared up rows] or absent
    kSharedDown,      // [d_model, shared width]
    kSharedDownBias,  // [d_model] or absent
    kRouter,          // [n_experts, d_model], packed in f32
    kCorrectionBias,  // [n_experts] (Nemotron-H) or absent
    kExpertsUp,       // [n_experts, up rows, expert_dim]
    kExpertsDown,     // [n_experts, expert_dim, width]
    kLatentDown,      // [latent, d_model] (fc1_latent_proj), or absent
    kLatentUp,        // [d_model, latent] (fc2_latent_proj), or absent
    kTensors,
  };

  std::vector<StatePart> state_parts() const override { return {}; }
  std::vector<int64_t> scratch_widths() const override;
  std::span<const std::string_view> phase_names() const override;
  std::vector<OpQuery> ops() const override;
  void forward(LayerContext& ctx) const override;
  // The norm, shared MLP and router, and top_k of the experts (every expert has one shape and
  // dtype, so any top_k of them weigh the same).
  size_t step_matrix_bytes() const override;

 private:
  MoeParams params_;
  int64_t shared_width_;
  Activation shared_activation_;
  float norm_eps_, residual_multiplier_;
};

}  // namespace mb

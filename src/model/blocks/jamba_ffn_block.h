// SPDX-License-Identifier: MIT
// Jamba's feed-forward block, after every mixer (HF JambaMLP or JambaSparseMoeBlock, by layer):
//   x = rms_norm(h, pre_ff_layernorm);  h = h + ffn(x)
// A dense layer is SwiGLU with separate gate and up matrices, down(silu(gate x) * up x); the two
// products write the two halves of one row so the shared `glu` op applies. An expert layer is the
// `moe` op (ops/moe.h) with MoeScoring::SoftmaxAll: a softmax over all experts, the top k of it
// as the weights without renormalisation, SwiGLU experts, and no shared expert.
//
// Checkpoint names: feed_forward.{gate,up,down}_proj.weight; feed_forward.router.weight and the
// experts stacked as transformers v5 saves them (experts.gate_up_proj [E, 2 W, d], gate first;
// experts.down_proj [E, d, W]), or one tensor per expert as older saves hold them
// (experts.{e}.{gate,up,down}_proj.weight). GGUF: ffn_norm, ffn_{gate,up,down} or ffn_gate_inp and
// ffn_{gate,up,down}_exps.
#pragma once

#include <vector>

#include "model/blocks/block.h"
#include "ops/moe.h"

namespace mb {

class JambaFfnBlock final : public Block {
 public:
  JambaFfnBlock(const ModelConfig& config, const BlockSpec& spec, WeightBinder& binder);

  // The tensors of the block, indexed by Tensor; a dense layer has no router or experts, an
  // expert layer no dense matrices.
  static std::vector<TensorSpec> schema(const ModelConfig& config, const BlockSpec& block);
  enum Tensor : size_t {
    kNorm,         // [d_model]
    kGate,         // [W, d_model]
    kUp,           // [W, d_model]
    kDown,         // [d_model, W]
    kRouter,       // [n_experts, d_model], packed in f32
    kExpertsUp,    // [n_experts, 2 W, d_model]: gate | up
    kExpertsDown,  // [n_experts, d_model, W]
    kTensors,
  };

  std::vector<StatePart> state_parts() const override { return {}; }
  std::vector<int64_t> scratch_widths() const override;
  std::span<const std::string_view> phase_names() const override;
  std::vector<OpQuery> ops() const override;
  void forward(LayerContext& ctx) const override;
  // The norm, the dense matrices or the router, and top_k of the experts.
  size_t step_matrix_bytes() const override;

 private:
  bool experts_;
  MoeParams params_;  // the expert layers' (d_model and width also the dense layers')
  float norm_eps_;
};

}  // namespace mb

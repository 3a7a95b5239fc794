// SPDX-License-Identifier: MIT
// Qwen3.5's Gated DeltaNet mixer (HF Qwen3_5GatedDeltaNet; ../shared/specs/gated-deltanet.md
// section 4.2), one layer's linear-attention half on its zero-centred input norm:
//   qkv | z | b | a = in_proj_qkv x | in_proj_z x | in_proj_b x | in_proj_a x   (products over the round)
//   c = silu(causal_conv(qkv))            over q | k | v only, no bias, its K - 1 columns carried
//   o = gated_delta_net(c, b, a)          ops/gated_delta_net.h: the matrix state per value head
//   y = rms(o_h) * w * silu(z_h)          per value head of dv: norm first, then gate (plain w)
//   h += out_proj y
#pragma once

#include <vector>

#include "model/blocks/block.h"

namespace mb {

class GdnBlock final : public Block {
 public:
  GdnBlock(const ModelConfig& config, const BlockSpec& spec, WeightBinder& binder);
  static std::vector<TensorSpec> schema(const ModelConfig& config, const BlockSpec& block);
  enum Tensor : size_t {
    kNorm,      // [d_model]: input_layernorm, zero-centred (bound as 1 + w)
    kInQkv,     // [conv width, d_model]: rows q (nk dk) | k (nk dk) | v (nv dv)
    kInZ,       // [nv dv, d_model]
    kInB,       // [nv, d_model]
    kInA,       // [nv, d_model]
    kConv,      // [conv width, 1, K], bound tap-major [K, conv width]
    kDtBias,    // [nv]
    kALog,      // [nv]: A_log, or a GGUF file's A = -exp(A_log)
    kGateNorm,  // [dv]: norm.weight, plain (not zero-centred)
    kOutProj,   // [d_model, nv dv]
    kTensors,
    kANeg = kTensors,  // derived: -exp(A_log) [nv]
  };
  // Two fixed parts: "conv" [K - 1, conv width] and "gdn", the f32 matrix state [nv, dv, dk].
  std::vector<StatePart> state_parts() const override;
  std::vector<int64_t> scratch_widths() const override;
  std::span<const std::string_view> phase_names() const override;
  std::vector<OpQuery> ops() const override;
  void forward(LayerContext& ctx) const override;

 private:
  // The gated norm of y's rows: each value head's RMSNorm times w, then times silu(z).
  void gate(const LayerContext& ctx, View y, View z) const;

  int64_t d_model_, nk_, nv_, dk_, dv_, kernel_, conv_width_;
  bool tiled_heads_;
  float norm_eps_;
};

}  // namespace mb

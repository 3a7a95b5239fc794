// SPDX-License-Identifier: MIT
// The one place that maps a block kind to its class.
#include "core/error.h"
#include "model/blocks/attention_block.h"
#include "model/blocks/block.h"
#include "model/blocks/falcon_h1_block.h"
#include "model/blocks/gated_attention_block.h"
#include "model/blocks/gdn_block.h"
#include "model/blocks/jamba_ffn_block.h"
#include "model/blocks/lfm2_blocks.h"
#include "model/blocks/mamba1_block.h"
#include "model/blocks/mamba2_block.h"
#include "model/blocks/mamba3_block.h"
#include "model/blocks/mlp_block.h"
#include "model/blocks/moe_block.h"
#include "model/blocks/zamba2_block.h"
#include "model/weight_binder.h"

namespace mb {

std::unique_ptr<Block> make_block(const ModelConfig& config, const BlockSpec& spec, WeightBinder& binder) {
  switch (spec.kind) {
    case BlockKind::Mamba1Mixer:
      return std::make_unique<Mamba1Block>(config, spec, binder);
    case BlockKind::Mamba2Mixer:
      return std::make_unique<Mamba2Block>(config, spec, binder);
    case BlockKind::Mamba3Mixer:
      return std::make_unique<Mamba3Block>(config, spec, binder);
    case BlockKind::Attention:
      return std::make_unique<AttentionBlock>(config, spec, binder);
    case BlockKind::Mlp:
      return std::make_unique<MlpBlock>(config, spec, binder);
    case BlockKind::Moe:
      return std::make_unique<MoeBlock>(config, spec, binder);
    case BlockKind::JambaFfn:
      return std::make_unique<JambaFfnBlock>(config, spec, binder);
    case BlockKind::FalconH1Mixer:
      return std::make_unique<FalconH1MixerBlock>(config, spec, binder);
    case BlockKind::FalconH1Mlp:
      return std::make_unique<FalconH1MlpBlock>(config, spec, binder);
    case BlockKind::ShortConv:
      return std::make_unique<ShortConvBlock>(config, spec, binder);
    case BlockKind::Lfm2Attention:
      return std::make_unique<Lfm2AttentionBlock>(config, spec, binder);
    case BlockKind::Lfm2Mlp:
      return std::make_unique<Lfm2MlpBlock>(config, spec, binder);
    case BlockKind::Lfm2Moe:
      return std::make_unique<Lfm2MoeBlock>(config, spec, binder);
    case BlockKind::Zamba2Shared:
      return std::make_unique<Zamba2SharedBlock>(config, spec, binder);
    case BlockKind::GatedDeltaNet:
      return std::make_unique<GdnBlock>(config, spec, binder);
    case BlockKind::GatedAttention:
      return std::make_unique<GatedAttentionBlock>(config, spec, binder);
    case BlockKind::Custom:
      break;
  }
  throw Error("unknown block kind");
}

size_t Block::step_matrix_bytes() const {
  size_t bytes = 0;
  for (const Weight& w : weights_) {
    bytes += packed_bytes(w.host_matrix);
    for (const WeightMatrix& expert : w.host_experts) bytes += packed_bytes(expert);
  }
  return bytes;
}

Weight derived_weight(WeightBinder& binder, std::vector<float> values) {
  Weight w;
  w.count = static_cast<int64_t>(values.size());
  w.host_values = binder.keep(std::move(values));
  return w;
}

void add_to_residual(const LayerContext& ctx, View x, Matrix w, View bias, float multiplier, View out,
                     PhaseId phase) {
  if (multiplier == 1.0f) {
    ctx.backend.matmul(ctx.stream,
                       {x, ctx.m, w, bias, ctx.hidden, true, false, {}, phase});  // += [m, w.rows]
    return;
  }
  ctx.backend.matmul(ctx.stream, {x, ctx.m, w, bias, out, false, false, {}, phase});
  ctx.backend.scale(ctx.stream, {out, ctx.m, w.rows, multiplier, true, ctx.hidden, phase});
}

}  // namespace mb

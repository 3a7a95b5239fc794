// SPDX-License-Identifier: MIT
#include "model/blocks/jamba_ffn_block.h"

#include <cmath>
#include <iterator>

#include "model/weight_binder.h"

namespace mb {
namespace {

enum Phase : int { kNormPhase, kUpPhase, kActivationPhase, kDownPhase, kRouterPhase, kExpertsPhase };
constexpr std::string_view kPhaseNames[] = {"rmsnorm",    "gate+up gemm", "activation", "down gemm+residual",
                                            "moe router", "moe experts"};
static_assert(std::size(kPhaseNames) == kExpertsPhase + 1);

// Scratch buffers, in the order of scratch_widths().
enum Scratch : size_t { kXn, kGateUp, kLogits, kRoutes, kGathered, kHidden, kExpertOut, kSums };

bool jamba_expert_layer(const ModelConfig& c, int64_t layer) {
  return c.jamba.experts_at(layer, c.hybrid.moe.n_experts);
}

MoeParams jamba_moe_params(const ModelConfig& c) {
  const MoeConfig& e = c.hybrid.moe;
  // The router's softmax runs over every expert and the chosen probabilities are the weights as
  // they are (JambaSparseMoeBlock: no norm_topk_prob, no scaling).
  return {.d_model = c.d_model,
          .n_experts = e.n_experts,
          .top_k = e.top_k,
          .width = c.hybrid.mlp.width,
          .activation = Activation::SwiGlu,
          .scoring = MoeScoring::SoftmaxAll,
          .normalize = false,
          .scale = 1.0f};
}

TensorSpec jamba_matrix(std::string name, std::vector<int64_t> shape, double bound, std::string gguf,
                        bool wanted) {
  TensorSpec s;
  s.name = std::move(name);
  s.shape = std::move(shape);
  s.role = s.shape.size() == 3 ? TensorRole::Experts : TensorRole::Matrix;
  s.init = {TensorInit::Uniform, bound};
  s.wanted = wanted;
  s.gguf = std::move(gguf);
  return s;
}

}  // namespace

std::vector<TensorSpec> JambaFfnBlock::schema(const ModelConfig& c, const BlockSpec& block) {
  const bool moe = jamba_expert_layer(c, block.layer);
  const int64_t d = c.d_model, W = c.hybrid.mlp.width, E = moe ? c.hybrid.moe.n_experts : 1;
  // Unit-variance products for unit-variance inputs; the down products write the residual stream
  // and are scaled down by sqrt(n_layer), as the other blocks' are.
  const double in_bound = std::sqrt(3.0 / static_cast<double>(d));
  const double down_bound =
      std::sqrt(3.0 / static_cast<double>(W)) / std::sqrt(static_cast<double>(c.n_layer));
  TensorSpec norm{.name = block.norm(), .shape = {d}, .gguf = block.gguf(block.names.gguf_norm)};
  TensorSpec router =
      jamba_matrix(block.tensor("router.weight"), {E, d}, in_bound, block.gguf("ffn_gate_inp.weight"), moe);
  router.keep_f32 = true;
  // llama.cpp's converter stacks the experts and keeps gate and up apart (ffn_gate_exps,
  // ffn_up_exps): the GGUF halves of the fused [gate; up] tensor.
  TensorSpec up = jamba_matrix(block.tensor("experts.gate_up_proj"), {E, 2 * W, d}, in_bound,
                               block.gguf("ffn_gate_exps.weight"), moe);
  up.gguf_form = GgufForm::SplitHalves;
  up.gguf_second = block.gguf("ffn_up_exps.weight");
  // Published checkpoints (and make-model) hold one gate and one up tensor per expert.
  up.expert_name = block.tensor("experts.{e}.gate_proj.weight");
  up.expert_second_name = block.tensor("experts.{e}.up_proj.weight");
  TensorSpec down = jamba_matrix(block.tensor("experts.down_proj"), {E, d, W}, down_bound,
                                 block.gguf("ffn_down_exps.weight"), moe);
  down.expert_name = block.tensor("experts.{e}.down_proj.weight");
  return {
      norm,
      jamba_matrix(block.tensor("gate_proj.weight"), {W, d}, in_bound, block.gguf("ffn_gate.weight"), !moe),
      jamba_matrix(block.tensor("up_proj.weight"), {W, d}, in_bound, block.gguf("ffn_up.weight"), !moe),
      jamba_matrix(block.tensor("down_proj.weight"), {d, W}, down_bound, block.gguf("ffn_down.weight"), !moe),
      router,
      up,
      down};
}

JambaFfnBlock::JambaFfnBlock(const ModelConfig& c, const BlockSpec& spec, WeightBinder& binder)
    : Block(BlockKind::JambaFfn, spec),
      experts_(jamba_expert_layer(c, spec.layer)),
      params_(jamba_moe_params(c)),
      norm_eps_(c.norm_eps) {
  weights_ = bind_weights(binder, schema(c, spec));
}

std::vector<int64_t> JambaFfnBlock::scratch_widths() const {
  const int64_t d = params_.d_model;
  if (!experts_) return {d, params_.up_rows()};
  return {d, 1, params_.n_experts, 2 * params_.top_k, d, params_.up_rows(), d, d};
}

std::span<const std::string_view> JambaFfnBlock::phase_names() const {
  return kPhaseNames;
}

std::vector<OpQuery> JambaFfnBlock::ops() const {
  if (experts_)
    return {{OpKind::RmsNorm},
            {OpKind::Moe, weight(kExpertsUp).host_experts.front().dtype},
            {OpKind::Moe, weight(kExpertsDown).host_experts.front().dtype}};
  return {{OpKind::RmsNorm},
          {OpKind::Matmul, weight(kGate).host_matrix.dtype},
          {OpKind::Matmul, weight(kUp).host_matrix.dtype},
          {OpKind::Matmul, weight(kDown).host_matrix.dtype},
          {OpKind::Glu}};
}

size_t JambaFfnBlock::step_matrix_bytes() const {
  if (!experts_) return Block::step_matrix_bytes();
  size_t bytes = packed_bytes(weight(kRouter).host_matrix);
  for (const Tensor experts : {kExpertsUp, kExpertsDown})
    bytes += static_cast<size_t>(params_.top_k) * packed_bytes(weight(experts).host_experts.front());
  return bytes;
}

void JambaFfnBlock::forward(LayerContext& ctx) const {
  const Backend& be = ctx.backend;
  Stream& s = ctx.stream;
  const int64_t m = ctx.m, W = params_.width;
  const View xn = ctx.scratch[kXn];
  const NormSegment norm{0, params_.d_model, values(kNorm)};
  be.rms_norm(s, {ctx.hidden, m, std::span(&norm, 1), norm_eps_, xn, phase(kNormPhase)});  // [m, d]
  if (!experts_) {
    // gate x and up x into the two halves of one row, so that glu computes silu(gate) * up.
    const View gate_up = ctx.scratch[kGateUp];
    be.matmul(s, {.x = xn, .m = m, .w = matrix(kGate), .y = gate_up, .phase = phase(kUpPhase)});  // [m, W]
    be.matmul(s, {.x = xn, .m = m, .w = matrix(kUp), .y = gate_up.column(W), .phase = phase(kUpPhase)});
    be.glu(s, {gate_up, m, W, Activation::SwiGlu, gate_up, phase(kActivationPhase)});  // -> [m, W] in place
    be.matmul(s, {.x = gate_up,
                  .m = m,
                  .w = matrix(kDown),
                  .y = ctx.hidden,
                  .accumulate = true,
                  .phase = phase(kDownPhase)});  // h += [m, W] x [d, W]^T
    return;
  }
  MoeOp moe;
  moe.params = params_;
  moe.x = xn;
  moe.m = m;
  moe.router = matrix(kRouter);
  moe.up = weight(kExpertsUp).experts;
  moe.down = weight(kExpertsDown).experts;
  moe.y = ctx.hidden;  // h + the experts' weighted sum, added once (as HF adds the block's output)
  moe.accumulate = true;
  moe.logits = ctx.scratch[kLogits];
  moe.routes = ctx.scratch[kRoutes];
  moe.rows = ctx.scratch[kGathered];
  moe.hidden = ctx.scratch[kHidden];
  moe.out = ctx.scratch[kExpertOut];
  moe.acc = ctx.scratch[kSums];
  moe.router_phase = phase(kRouterPhase);
  moe.phase = phase(kExpertsPhase);
  be.moe(s, moe);
}

}  // namespace mb

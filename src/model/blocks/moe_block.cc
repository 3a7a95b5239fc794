// SPDX-License-Identifier: MIT
#include "model/blocks/moe_block.h"

#include <cmath>
#include <iterator>

#include "model/weight_binder.h"

namespace mb {
namespace {

enum Phase : int {
  kNormPhase,
  kSharedUpPhase,
  kSharedActivationPhase,
  kSharedDownPhase,
  kRouterPhase,
  kExpertsPhase,
  kResidualPhase,
  kLatentDownPhase,
  kLatentUpPhase
};
constexpr std::string_view kPhaseNames[] = {"rmsnorm",          "shared up gemm",       "shared activation",
                                            "shared down gemm", "moe router",           "moe experts",
                                            "moe residual",     "moe latent down gemm", "moe latent up gemm"};
static_assert(std::size(kPhaseNames) == kLatentUpPhase + 1);

// Scratch buffers, in the order of scratch_widths().
enum Scratch : size_t {
  kXn,
  kSharedRows,
  kOut,
  kLogits,
  kRoutes,
  kGathered,
  kHidden,
  kExpertOut,
  kSums,
  kLatentIn,
  kLatentOut
};

bool granite(const ModelConfig& c) {
  return c.family == ModelFamily::GraniteHybrid;
}

MoeParams moe_params(const ModelConfig& c) {
  const MoeConfig& e = c.hybrid.moe;
  return {c.d_model,
          e.n_experts,
          e.top_k,
          e.width,
          granite(c) ? Activation::SwiGlu : Activation::ReluSquared,
          e.scoring,
          e.normalize,
          static_cast<float>(e.scale),
          granite(c) ? 0 : e.latent};
}

// The shared MLP's width and activation: Granite's shared_mlp, or Nemotron-H's shared expert.
int64_t shared_width(const ModelConfig& c) {
  return granite(c) ? c.hybrid.mlp.width : c.hybrid.moe.shared_width;
}

int64_t rows_for(Activation activation, int64_t width) {
  return activation == Activation::SwiGlu ? 2 * width : width;
}

TensorSpec matrix_spec(std::string name, std::vector<int64_t> shape, double bound, std::string gguf) {
  TensorSpec s;
  s.name = std::move(name);
  s.shape = std::move(shape);
  s.role = s.shape.size() == 3 ? TensorRole::Experts : TensorRole::Matrix;
  s.init = {TensorInit::Uniform, bound};
  s.gguf = std::move(gguf);
  return s;
}

TensorSpec bias_spec(std::string name, int64_t rows, bool wanted, std::string gguf) {
  return {.name = std::move(name),
          .shape = {rows},
          .init = {TensorInit::Uniform, 0.1},
          .wanted = wanted,
          .gguf = std::move(gguf)};
}

}  // namespace

std::vector<TensorSpec> MoeBlock::schema(const ModelConfig& c, const BlockSpec& block) {
  const MoeParams p = moe_params(c);
  const bool g = granite(c);
  const int64_t d = c.d_model, E = p.n_experts, S = shared_width(c), de = p.expert_dim(), L = p.latent;
  const Activation shared_activation = g ? Activation::SwiGlu : Activation::ReluSquared;
  const bool bias = !g && c.hybrid.mlp.bias;
  // Unit-variance products for unit-variance inputs; the down products write the residual stream
  // and are scaled down by sqrt(n_layer), as the MLP's are (mlp_block.cc).
  const double in_bound = std::sqrt(3.0 / static_cast<double>(d)), depth = std::sqrt(double(c.n_layer));
  const double expert_in_bound = std::sqrt(3.0 / static_cast<double>(de));
  const double shared_down_bound = std::sqrt(3.0 / static_cast<double>(S)) / depth;
  const double expert_down_bound = std::sqrt(3.0 / static_cast<double>(p.width)) / depth;

  TensorSpec norm{.name = block.norm(), .shape = {d}, .gguf = block.gguf(block.names.gguf_norm)};
  // Granite names its shared MLP beside block_sparse_moe; Nemotron-H inside the mixer. llama.cpp's
  // converter splits Granite's fused [gate; up] matrices in two, the shared MLP's into
  // ffn_gate_shexp and ffn_up_shexp and the experts' into ffn_gate_exps and ffn_up_exps.
  const std::string shared = g ? block.names.prefix + "shared_mlp." : block.tensor("shared_experts.");
  const auto split_if_granite = [&](TensorSpec& spec, const char* gate, const char* up) {
    if (!g) return;
    spec.gguf = block.gguf(gate);
    spec.gguf_form = GgufForm::SplitHalves;
    spec.gguf_second = block.gguf(up);
  };
  TensorSpec shared_up =
      matrix_spec(shared + (g ? "input_linear.weight" : "up_proj.weight"),
                  {rows_for(shared_activation, S), d}, in_bound, block.gguf("ffn_up_shexp.weight"));
  split_if_granite(shared_up, "ffn_gate_shexp.weight", "ffn_up_shexp.weight");
  TensorSpec shared_down = matrix_spec(shared + (g ? "output_linear.weight" : "down_proj.weight"), {d, S},
                                       shared_down_bound, block.gguf("ffn_down_shexp.weight"));
  TensorSpec router = matrix_spec(block.tensor(g ? "router.layer.weight" : "gate.weight"), {E, d}, in_bound,
                                  block.gguf("ffn_gate_inp.weight"));
  router.keep_f32 = true;
  // Nemotron-H's choice bias, kept in f32 as HF keeps it (_keep_in_fp32_modules_strict). Its
  // spread is of the order of the sigmoid scores' differences, so it changes some choices.
  TensorSpec correction{.name = block.tensor("gate.e_score_correction_bias"),
                        .shape = {E},
                        .init = {TensorInit::Uniform, 0.05},
                        .wanted = p.scoring == MoeScoring::SigmoidBias,
                        .keep_f32 = true,
                        .gguf = block.gguf("exp_probs_b.bias")};
  // Granite stores each kind of expert matrix stacked ([E, rows, cols]); Nemotron-H's checkpoints
  // one tensor per expert, and transformers' own saves stacked under the module's parameter name.
  TensorSpec up = matrix_spec(block.tensor(g ? "input_linear.weight" : "experts.up_proj"),
                              {E, p.up_rows(), de}, expert_in_bound, block.gguf("ffn_up_exps.weight"));
  split_if_granite(up, "ffn_gate_exps.weight", "ffn_up_exps.weight");
  TensorSpec down = matrix_spec(block.tensor(g ? "output_linear.weight" : "experts.down_proj"),
                                {E, de, p.width}, expert_down_bound, block.gguf("ffn_down_exps.weight"));
  // LatentMoE's projections around the experts (llama.cpp: ffn_latent_down before, ffn_latent_up
  // after); a config without moe_latent_size has neither.
  TensorSpec latent_down = matrix_spec(block.tensor("fc1_latent_proj.weight"), {L, d}, in_bound,
                                       block.gguf("ffn_latent_down.weight"));
  TensorSpec latent_up = matrix_spec(block.tensor("fc2_latent_proj.weight"), {d, L},
                                     std::sqrt(3.0 / static_cast<double>(L > 0 ? L : 1)) / depth,
                                     block.gguf("ffn_latent_up.weight"));
  latent_down.wanted = latent_up.wanted = L > 0;
  if (!g) {
    up.expert_name = block.tensor("experts.{e}.up_proj.weight");
    down.expert_name = block.tensor("experts.{e}.down_proj.weight");
  }
  return {norm,
          shared_up,
          bias_spec(shared + "up_proj.bias", rows_for(shared_activation, S), bias,
                    block.gguf("ffn_up_shexp.bias")),
          shared_down,
          bias_spec(shared + "down_proj.bias", d, bias, block.gguf("ffn_down_shexp.bias")),
          router,
          correction,
          up,
          down,
          latent_down,
          latent_up};
}

MoeBlock::MoeBlock(const ModelConfig& c, const BlockSpec& spec, WeightBinder& binder)
    : Block(BlockKind::Moe, spec),
      params_(moe_params(c)),
      shared_width_(shared_width(c)),
      shared_activation_(granite(c) ? Activation::SwiGlu : Activation::ReluSquared),
      norm_eps_(c.norm_eps),
      residual_multiplier_(static_cast<float>(c.hybrid.residual_multiplier)) {
  weights_ = bind_weights(binder, schema(c, spec));
}

std::vector<int64_t> MoeBlock::scratch_widths() const {
  const int64_t d = params_.d_model, de = params_.expert_dim(), latent = params_.latent > 0 ? de : 1;
  return {d,
          rows_for(shared_activation_, shared_width_),
          d,
          params_.n_experts,
          2 * params_.top_k,
          de,
          params_.up_rows(),
          de,
          de,
          latent,
          latent};
}

std::span<const std::string_view> MoeBlock::phase_names() const {
  return kPhaseNames;
}

std::vector<OpQuery> MoeBlock::ops() const {
  std::vector<OpQuery> ops = {{OpKind::RmsNorm},
                              {OpKind::Matmul, weight(kSharedUp).host_matrix.dtype},
                              {OpKind::Matmul, weight(kSharedDown).host_matrix.dtype},
                              {OpKind::Glu},
                              {OpKind::Moe, weight(kExpertsUp).host_experts.front().dtype},
                              {OpKind::Moe, weight(kExpertsDown).host_experts.front().dtype},
                              {OpKind::Scale}};
  if (params_.latent > 0)
    for (const Tensor t : {kLatentDown, kLatentUp})
      ops.push_back({OpKind::Matmul, weight(t).host_matrix.dtype});
  return ops;
}

size_t MoeBlock::step_matrix_bytes() const {
  size_t bytes = 0;
  for (const Weight& w : weights_) bytes += packed_bytes(w.host_matrix);
  for (const Tensor experts : {kExpertsUp, kExpertsDown})
    bytes += static_cast<size_t>(params_.top_k) * packed_bytes(weight(experts).host_experts.front());
  return bytes;
}

void MoeBlock::forward(LayerContext& ctx) const {
  const Backend& be = ctx.backend;
  Stream& s = ctx.stream;
  const int64_t m = ctx.m, d = params_.d_model;
  const View xn = ctx.scratch[kXn], shared = ctx.scratch[kSharedRows], out = ctx.scratch[kOut];
  const NormSegment norm{0, d, values(kNorm)};
  be.rms_norm(s, {ctx.hidden, m, std::span(&norm, 1), norm_eps_, xn, phase(kNormPhase)});  // [m, d]
  be.matmul(s, {xn,
                m,
                matrix(kSharedUp),
                values(kSharedUpBias),
                shared,
                false,
                false,
                {},
                phase(kSharedUpPhase)});  // -> [m, shared up rows]
  be.glu(s, {shared, m, shared_width_, shared_activation_, shared, phase(kSharedActivationPhase)});
  be.matmul(s, {shared,
                m,
                matrix(kSharedDown),
                values(kSharedDownBias),
                out,
                false,
                false,
                {},
                phase(kSharedDownPhase)});  // -> [m, d]
  // Latent experts read fc1 xn and sum into the latent rows, which fc2 then adds to f.
  const bool latent = params_.latent > 0;
  const View latent_in = ctx.scratch[kLatentIn], latent_out = ctx.scratch[kLatentOut];
  if (latent)
    be.matmul(s, {xn, m, matrix(kLatentDown), {}, latent_in, false, false, {}, phase(kLatentDownPhase)});
  MoeOp moe;
  moe.params = params_;
  moe.x = xn;
  if (latent) moe.xe = latent_in;  // [m, latent]
  moe.m = m;
  moe.router = matrix(kRouter);
  moe.correction_bias = values(kCorrectionBias);
  moe.up = weight(kExpertsUp).experts;
  moe.down = weight(kExpertsDown).experts;
  moe.y = latent ? latent_out : out;  // f = shared + experts, or their latent sums
  moe.accumulate = !latent;
  moe.logits = ctx.scratch[kLogits];
  moe.routes = ctx.scratch[kRoutes];
  moe.rows = ctx.scratch[kGathered];
  moe.hidden = ctx.scratch[kHidden];
  moe.out = ctx.scratch[kExpertOut];
  moe.acc = ctx.scratch[kSums];
  moe.router_phase = phase(kRouterPhase);
  moe.phase = phase(kExpertsPhase);
  be.moe(s, moe);
  if (latent)
    be.matmul(s,
              {latent_out, m, matrix(kLatentUp), {}, out, true, false, {}, phase(kLatentUpPhase)});  // f +=
  // h + f * residual_multiplier, as the reference adds a scaled branch (a multiplier of 1 is exact).
  be.scale(s, {out, m, d, residual_multiplier_, true, ctx.hidden, phase(kResidualPhase)});
}

}  // namespace mb

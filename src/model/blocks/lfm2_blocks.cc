// SPDX-License-Identifier: MIT
#include "model/blocks/lfm2_blocks.h"

#include <cmath>
#include <iterator>

#include "model/weight_binder.h"

namespace mb {
namespace {

TensorSpec lfm2_norm(const BlockSpec& block, int64_t d) {
  return {.name = block.norm(), .shape = {d}, .gguf = block.gguf(block.names.gguf_norm)};
}

TensorSpec lfm2_matrix(const BlockSpec& block, const std::string& name, std::vector<int64_t> shape,
                       double bound, const std::string& gguf) {
  return {.name = block.tensor(name),
          .shape = std::move(shape),
          .role = TensorRole::Matrix,
          .init = {TensorInit::Uniform, bound},
          .gguf = block.gguf(gguf)};
}

// Unit-variance products for unit-variance inputs; a product that writes the residual stream is
// scaled down by sqrt(n_layer), as the other blocks' are.
double in_bound(int64_t cols) {
  return std::sqrt(3.0 / static_cast<double>(cols));
}
double out_bound(const ModelConfig& c, int64_t cols) {
  return in_bound(cols) / std::sqrt(static_cast<double>(c.n_layer));
}

// ---- short conv ---------------------------------------------------------------------------------

enum ConvPhase : int { kConvNormPhase, kInProjPhase, kShortConvPhase, kOutProjPhase };
constexpr std::string_view kConvPhaseNames[] = {"rmsnorm", "in_proj gemm", "short conv",
                                                "out_proj gemm+residual"};
static_assert(std::size(kConvPhaseNames) == kOutProjPhase + 1);
enum ConvScratch : size_t { kConvXn, kConvBcx, kConvY };

// ---- attention ----------------------------------------------------------------------------------

enum AttnPhase : int {
  kAttnNormPhase,
  kQkvPhase,
  kQkNormPhase,
  kRopePhase,
  kAppendPhase,
  kAttentionPhase,
  kOutPhase
};
constexpr std::string_view kAttnPhaseNames[] = {
    "rmsnorm", "qkv gemm", "qk norm", "rope", "kv append", "attention", "out_proj gemm+residual"};
static_assert(std::size(kAttnPhaseNames) == kOutPhase + 1);
enum AttnScratch : size_t { kAttnXn, kQRows, kKRows, kVRows, kAttnY };
enum KvPart : size_t { kKeys, kValues };

// ---- feed-forward -------------------------------------------------------------------------------

enum MlpPhase : int { kMlpNormPhase, kUpPhase, kActivationPhase, kDownPhase };
constexpr std::string_view kMlpPhaseNames[] = {"rmsnorm", "w1 w3 gemm", "activation", "w2 gemm+residual"};
static_assert(std::size(kMlpPhaseNames) == kDownPhase + 1);
enum MlpScratch : size_t { kMlpXn, kGateUp };

enum MoePhase : int { kMoeNormPhase, kRouterPhase, kExpertsPhase };
constexpr std::string_view kMoePhaseNames[] = {"rmsnorm", "moe router", "moe experts"};
static_assert(std::size(kMoePhaseNames) == kExpertsPhase + 1);
enum MoeScratch : size_t { kMoeXn, kLogits, kRoutes, kGathered, kHidden, kExpertOut, kSums };

// LFM2-MoE's routing (Lfm2MoeSparseMoeBlock.route_tokens_to_experts): the sum of the chosen
// weights gets 1e-6, not transformers' usual 1e-20.
constexpr float kLfm2MoeNormEpsilon = 1e-6f;

MoeParams lfm2_moe_params(const ModelConfig& c) {
  const MoeConfig& e = c.hybrid.moe;
  MoeParams p{c.d_model,
              e.n_experts,
              e.top_k,
              e.width,
              Activation::SwiGlu,
              MoeScoring::SigmoidBias,
              e.normalize,
              static_cast<float>(e.scale)};
  p.norm_epsilon = kLfm2MoeNormEpsilon;
  return p;
}

}  // namespace

// ---- ShortConvBlock -----------------------------------------------------------------------------

std::vector<TensorSpec> ShortConvBlock::schema(const ModelConfig& c, const BlockSpec& block) {
  const int64_t d = c.d_model, K = c.lfm2.conv_kernel;
  TensorSpec conv{.name = block.tensor("conv.weight"),
                  .shape = {d, 1, K},
                  .role = TensorRole::ConvTaps,
                  .init = {TensorInit::Uniform, 1.0 / std::sqrt(static_cast<double>(K))},
                  .gguf = block.gguf("shortconv.conv.weight"),
                  .gguf_form = GgufForm::SqueezedConv};
  return {lfm2_norm(block, d),
          lfm2_matrix(block, "in_proj.weight", {3 * d, d}, in_bound(d), "shortconv.in_proj.weight"), conv,
          lfm2_matrix(block, "out_proj.weight", {d, d}, out_bound(c, d), "shortconv.out_proj.weight")};
}

ShortConvBlock::ShortConvBlock(const ModelConfig& c, const BlockSpec& spec, WeightBinder& binder)
    : Block(BlockKind::ShortConv, spec),
      d_model_(c.d_model),
      kernel_(c.lfm2.conv_kernel),
      norm_eps_(c.norm_eps) {
  weights_ = bind_weights(binder, schema(c, spec));
}

std::vector<StatePart> ShortConvBlock::state_parts() const {
  return {{"conv", {kernel_ - 1, d_model_}, false}};
}

std::vector<int64_t> ShortConvBlock::scratch_widths() const {
  return {d_model_, 3 * d_model_, d_model_};
}

std::span<const std::string_view> ShortConvBlock::phase_names() const {
  return kConvPhaseNames;
}

std::vector<OpQuery> ShortConvBlock::ops() const {
  return {{OpKind::RmsNorm},
          {OpKind::Matmul, weight(kInProj).host_matrix.dtype},
          {OpKind::Matmul, weight(kOutProj).host_matrix.dtype},
          {OpKind::ShortConv, DType::F32, kernel_}};
}

void ShortConvBlock::forward(LayerContext& ctx) const {
  const Backend& be = ctx.backend;
  Stream& s = ctx.stream;
  const int64_t m = ctx.m, d = d_model_;
  const View xn = ctx.scratch[kConvXn], bcx = ctx.scratch[kConvBcx], y = ctx.scratch[kConvY];
  const NormSegment norm{0, d, values(kNorm)};
  be.rms_norm(s, {ctx.hidden, m, std::span(&norm, 1), norm_eps_, xn, phase(kConvNormPhase)});  // [m, d]
  be.matmul(s, {xn, m, matrix(kInProj), {}, bcx, false, false, {}, phase(kInProjPhase)});      // [m, 3d]
  be.short_conv(s, {bcx, d, static_cast<int>(kernel_), values(kConv), state_offset(), y, ctx.parts,
                    phase(kShortConvPhase)});  // -> y [m, d], the history of B * x carried
  add_to_residual(ctx, y, matrix(kOutProj), {}, 1.0f, {}, phase(kOutProjPhase));
}

// ---- Lfm2AttentionBlock -------------------------------------------------------------------------

std::vector<TensorSpec> Lfm2AttentionBlock::schema(const ModelConfig& c, const BlockSpec& block) {
  const AttentionConfig& a = c.hybrid.attention;
  const int64_t d = c.d_model, qw = a.n_heads * a.head_dim, kvw = a.n_kv_heads * a.head_dim, hd = a.head_dim;
  // NeoX RoPE: llama.cpp's converter keeps q and k as they are (no head-pair reordering).
  TensorSpec q_norm{.name = block.tensor("q_layernorm.weight"),
                    .shape = {hd},
                    .init = {TensorInit::AroundOne, 0.2},
                    .gguf = block.gguf("attn_q_norm.weight")};
  TensorSpec k_norm = q_norm;
  k_norm.name = block.tensor("k_layernorm.weight");
  k_norm.gguf = block.gguf("attn_k_norm.weight");
  return {lfm2_norm(block, d),
          lfm2_matrix(block, "q_proj.weight", {qw, d}, in_bound(d), "attn_q.weight"),
          lfm2_matrix(block, "k_proj.weight", {kvw, d}, in_bound(d), "attn_k.weight"),
          lfm2_matrix(block, "v_proj.weight", {kvw, d}, in_bound(d), "attn_v.weight"),
          lfm2_matrix(block, "out_proj.weight", {d, qw}, out_bound(c, qw), "attn_output.weight"),
          q_norm,
          k_norm};
}

Lfm2AttentionBlock::Lfm2AttentionBlock(const ModelConfig& c, const BlockSpec& spec, WeightBinder& binder)
    : Block(BlockKind::Lfm2Attention, spec),
      d_model_(c.d_model),
      n_heads_(c.hybrid.attention.n_heads),
      n_kv_heads_(c.hybrid.attention.n_kv_heads),
      head_dim_(c.hybrid.attention.head_dim),
      scale_(static_cast<float>(c.hybrid.attention.scale)),
      rope_theta_(c.hybrid.attention.rope_theta),
      norm_eps_(c.norm_eps) {
  weights_ = bind_weights(binder, schema(c, spec));
}

std::vector<StatePart> Lfm2AttentionBlock::state_parts() const {
  return {{"k", {n_kv_heads_, head_dim_}, true}, {"v", {n_kv_heads_, head_dim_}, true}};
}

std::vector<int64_t> Lfm2AttentionBlock::scratch_widths() const {
  const int64_t qw = n_heads_ * head_dim_, kvw = n_kv_heads_ * head_dim_;
  return {d_model_, qw, kvw, kvw, qw};
}

std::span<const std::string_view> Lfm2AttentionBlock::phase_names() const {
  return kAttnPhaseNames;
}

std::vector<OpQuery> Lfm2AttentionBlock::ops() const {
  return {{OpKind::RmsNorm},
          {OpKind::Matmul, weight(kQ).host_matrix.dtype},
          {OpKind::Matmul, weight(kO).host_matrix.dtype},
          {OpKind::Rope},
          {OpKind::AppendRows},
          {OpKind::Attention, DType::F32, head_dim_}};
}

void Lfm2AttentionBlock::norm_heads(const LayerContext& ctx, View x, int64_t heads, View weight) const {
  for (int64_t h0 = 0; h0 < heads; h0 += kMaxNormSegments) {
    NormSegment segments[kMaxNormSegments];
    int n = 0;
    for (int64_t h = h0; h < heads && n < kMaxNormSegments; ++h)
      segments[n++] = {h * head_dim_, head_dim_, weight};
    ctx.backend.rms_norm(ctx.stream, {x, ctx.m, std::span(segments, n), norm_eps_, x, phase(kQkNormPhase)});
  }
}

void Lfm2AttentionBlock::forward(LayerContext& ctx) const {
  const Backend& be = ctx.backend;
  Stream& s = ctx.stream;
  const int64_t m = ctx.m, hd = head_dim_, kvw = n_kv_heads_ * hd;
  const View xn = ctx.scratch[kAttnXn], q = ctx.scratch[kQRows], k = ctx.scratch[kKRows],
             v = ctx.scratch[kVRows], y = ctx.scratch[kAttnY];
  const NormSegment norm{0, d_model_, values(kNorm)};
  be.rms_norm(s, {ctx.hidden, m, std::span(&norm, 1), norm_eps_, xn, phase(kAttnNormPhase)});  // [m, d]
  be.matmul(s, {xn, m, matrix(kQ), {}, q, false, false, {}, phase(kQkvPhase)});                // [m, H hd]
  be.matmul(s, {xn, m, matrix(kK), {}, k, false, false, {}, phase(kQkvPhase)});                // [m, Hkv hd]
  be.matmul(s, {xn, m, matrix(kV), {}, v, false, false, {}, phase(kQkvPhase)});
  // Per-head RMSNorm, the weight shared by every head: each head is a column range of its row, so
  // one rms_norm op takes kMaxNormSegments heads of every row at once (the rows' stride is the
  // widest block's scratch width, not H hd, so the heads cannot be viewed as rows of their own).
  norm_heads(ctx, q, n_heads_, values(kQNorm));
  norm_heads(ctx, k, n_kv_heads_, values(kKNorm));
  // Then RoPE (NeoX pairing over the whole head), the keys once, before they enter the cache.
  be.rope(s, {hd, rope_theta_, q, n_heads_, k, n_kv_heads_, ctx.parts, phase(kRopePhase)});
  const std::vector<StatePart>& parts = state_layout().parts;
  be.append_rows(s, {k, kvw, parts[kKeys].offset, ctx.parts, phase(kAppendPhase)});
  be.append_rows(s, {v, kvw, parts[kValues].offset, ctx.parts, phase(kAppendPhase)});
  be.attention(s, {n_heads_, n_kv_heads_, hd, scale_, q, parts[kKeys].offset, parts[kValues].offset, y,
                   ctx.parts, phase(kAttentionPhase)});  // -> y [m, H hd]
  add_to_residual(ctx, y, matrix(kO), {}, 1.0f, {}, phase(kOutPhase));
}

// ---- Lfm2MlpBlock -------------------------------------------------------------------------------

std::vector<TensorSpec> Lfm2MlpBlock::schema(const ModelConfig& c, const BlockSpec& block) {
  const int64_t d = c.d_model, W = c.hybrid.mlp.width;
  return {lfm2_norm(block, d), lfm2_matrix(block, "w1.weight", {W, d}, in_bound(d), "ffn_gate.weight"),
          lfm2_matrix(block, "w3.weight", {W, d}, in_bound(d), "ffn_up.weight"),
          lfm2_matrix(block, "w2.weight", {d, W}, out_bound(c, W), "ffn_down.weight")};
}

Lfm2MlpBlock::Lfm2MlpBlock(const ModelConfig& c, const BlockSpec& spec, WeightBinder& binder)
    : Block(BlockKind::Lfm2Mlp, spec),
      d_model_(c.d_model),
      width_(c.hybrid.mlp.width),
      norm_eps_(c.norm_eps) {
  weights_ = bind_weights(binder, schema(c, spec));
}

std::vector<int64_t> Lfm2MlpBlock::scratch_widths() const {
  return {d_model_, 2 * width_};
}

std::span<const std::string_view> Lfm2MlpBlock::phase_names() const {
  return kMlpPhaseNames;
}

std::vector<OpQuery> Lfm2MlpBlock::ops() const {
  return {{OpKind::RmsNorm},
          {OpKind::Matmul, weight(kW1).host_matrix.dtype},
          {OpKind::Matmul, weight(kW2).host_matrix.dtype},
          {OpKind::Glu}};
}

void Lfm2MlpBlock::forward(LayerContext& ctx) const {
  const Backend& be = ctx.backend;
  Stream& s = ctx.stream;
  const int64_t m = ctx.m;
  const View xn = ctx.scratch[kMlpXn], gate_up = ctx.scratch[kGateUp];
  const NormSegment norm{0, d_model_, values(kNorm)};
  be.rms_norm(s, {ctx.hidden, m, std::span(&norm, 1), norm_eps_, xn, phase(kMlpNormPhase)});  // [m, d]
  // The gate and up products side by side, as glu reads them: [m, W] | [m, W].
  be.matmul(s, {xn, m, matrix(kW1), {}, gate_up, false, false, {}, phase(kUpPhase)});
  be.matmul(s, {xn, m, matrix(kW3), {}, gate_up.column(width_), false, false, {}, phase(kUpPhase)});
  be.glu(s,
         {gate_up, m, width_, Activation::SwiGlu, gate_up, phase(kActivationPhase)});  // -> [m, W] in place
  add_to_residual(ctx, gate_up, matrix(kW2), {}, 1.0f, {}, phase(kDownPhase));
}

// ---- Lfm2MoeBlock -------------------------------------------------------------------------------

std::vector<TensorSpec> Lfm2MoeBlock::schema(const ModelConfig& c, const BlockSpec& block) {
  const MoeParams p = lfm2_moe_params(c);
  const int64_t d = c.d_model, E = p.n_experts, W = p.width;
  TensorSpec router = lfm2_matrix(block, "gate.weight", {E, d}, in_bound(d), "ffn_gate_inp.weight");
  router.keep_f32 = true;
  // HF keeps expert_bias an f32 buffer; its spread is of the order of the sigmoid scores' so that
  // it changes some choices.
  TensorSpec bias{.name = block.tensor("expert_bias"),
                  .shape = {E},
                  .init = {TensorInit::Uniform, 0.05},
                  .wanted = c.lfm2.expert_bias,
                  .keep_f32 = true,
                  .gguf = block.gguf("exp_probs_b.bias")};
  // transformers' own stacked form (experts.gate_up_proj: per expert w1 rows then w3 rows);
  // llama.cpp's files hold it as ffn_gate_exps and ffn_up_exps.
  TensorSpec up{.name = block.tensor("experts.gate_up_proj"),
                .shape = {E, 2 * W, d},
                .role = TensorRole::Experts,
                .init = {TensorInit::Uniform, in_bound(d)},
                .gguf = block.gguf("ffn_gate_exps.weight"),
                .gguf_form = GgufForm::SplitHalves,
                .gguf_second = block.gguf("ffn_up_exps.weight")};
  TensorSpec down{.name = block.tensor("experts.down_proj"),
                  .shape = {E, d, W},
                  .role = TensorRole::Experts,
                  .init = {TensorInit::Uniform, out_bound(c, W)},
                  .gguf = block.gguf("ffn_down_exps.weight")};
  return {lfm2_norm(block, d), router, bias, up, down};
}

Lfm2MoeBlock::Lfm2MoeBlock(const ModelConfig& c, const BlockSpec& spec, WeightBinder& binder)
    : Block(BlockKind::Lfm2Moe, spec), params_(lfm2_moe_params(c)), norm_eps_(c.norm_eps) {
  std::vector<TensorSpec> specs = schema(c, spec);
  // The hub's files keep one tensor per expert and matrix (experts.{e}.w1, w3, w2), where
  // transformers' own saves and make-model stack them: w1 and w3 are joined into the expert's
  // [gate; up] matrix, as the moe op takes it.
  const std::string w1 = spec.tensor("experts.{e}.w1.weight"), w3 = spec.tensor("experts.{e}.w3.weight");
  const bool per_expert = binder.has(expert_tensor_name(w1, 0));
  if (per_expert) {
    specs[kExpertsUp].wanted = false;
    specs[kExpertsDown].expert_name = spec.tensor("experts.{e}.w2.weight");
  }
  weights_ = bind_weights(binder, specs);
  if (per_expert)
    weights_[kExpertsUp].host_experts =
        binder.joined_experts(w1, w3, params_.n_experts, params_.width, params_.d_model);
}

std::vector<int64_t> Lfm2MoeBlock::scratch_widths() const {
  const int64_t d = params_.d_model;
  return {d, params_.n_experts, 2 * params_.top_k, d, params_.up_rows(), d, d};
}

std::span<const std::string_view> Lfm2MoeBlock::phase_names() const {
  return kMoePhaseNames;
}

std::vector<OpQuery> Lfm2MoeBlock::ops() const {
  return {{OpKind::RmsNorm},
          {OpKind::Moe, weight(kExpertsUp).host_experts.front().dtype},
          {OpKind::Moe, weight(kExpertsDown).host_experts.front().dtype}};
}

size_t Lfm2MoeBlock::step_matrix_bytes() const {
  size_t bytes = packed_bytes(weight(kRouter).host_matrix);
  for (const Tensor experts : {kExpertsUp, kExpertsDown})
    bytes += static_cast<size_t>(params_.top_k) * packed_bytes(weight(experts).host_experts.front());
  return bytes;
}

void Lfm2MoeBlock::forward(LayerContext& ctx) const {
  const Backend& be = ctx.backend;
  Stream& s = ctx.stream;
  const int64_t m = ctx.m;
  const View xn = ctx.scratch[kMoeXn];
  const NormSegment norm{0, params_.d_model, values(kNorm)};
  be.rms_norm(s, {ctx.hidden, m, std::span(&norm, 1), norm_eps_, xn, phase(kMoeNormPhase)});  // [m, d]
  MoeOp moe;
  moe.params = params_;
  moe.x = xn;
  moe.m = m;
  moe.router = matrix(kRouter);
  moe.correction_bias = values(kExpertBias);
  moe.up = weight(kExpertsUp).experts;
  moe.down = weight(kExpertsDown).experts;
  moe.y = ctx.hidden;  // h += the weighted sum of the chosen experts
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

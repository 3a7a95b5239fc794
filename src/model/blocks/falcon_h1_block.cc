// SPDX-License-Identifier: MIT
#include "model/blocks/falcon_h1_block.h"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <numbers>

#include "model/blocks/attention_block.h"
#include "model/blocks/mamba2_block.h"
#include "model/weight_binder.h"

namespace mb {
namespace {

enum MixerPhase : int {
  kMixerNormPhase,
  kInProjPhase,
  kConvPhase,
  kScanPhase,
  kGateNormPhase,
  kOutProjPhase,
  kQkvPhase,
  kRopePhase,
  kAppendPhase,
  kAttentionPhase,
  kOProjPhase,
  kSumPhase,
};
constexpr std::string_view kMixerPhaseNames[] = {
    "rmsnorm",  "in_proj gemm", "conv+silu", "ssd scan",  "gated rmsnorm", "out_proj gemm",
    "qkv gemm", "rope",         "kv append", "attention", "o_proj gemm",   "branches+residual"};
static_assert(std::size(kMixerPhaseNames) == kSumPhase + 1);

// The mixer's scratch buffers, in the order of scratch_widths().
enum MixerScratch : size_t { kXn, kXs, kProj, kXbc, kY, kXa, kQRows, kKRows, kVRows, kYa, kOutM, kOutA };

// The mixer's tensors: the Mamba-2 schema's indices as they are (its norm, index 0, is the shared
// input_layernorm), then the attention schema's after its norm, then the vectors derived at load.
constexpr size_t kAttnBase = Mamba2Block::kTensors - 1;
constexpr size_t attn(size_t tensor) {
  return kAttnBase + tensor;
}
constexpr size_t kMixerTensors = attn(AttentionBlock::kTensors);
constexpr size_t kDerivedA = kMixerTensors, kDerivedABase2 = kMixerTensors + 1;

// The layer's blocks under the names transformers gives them: "model.layers.N." + "mamba." or
// "self_attn.", the shared norm input_layernorm (llama.cpp: attn_norm).
BlockSpec branch(const BlockSpec& block, BlockKind kind, const char* module) {
  BlockSpec s = block;
  s.kind = kind;
  s.names.module = module;
  return s;
}

}  // namespace

std::vector<TensorSpec> FalconH1MixerBlock::schema(const ModelConfig& c, const BlockSpec& block) {
  std::vector<TensorSpec> specs = Mamba2Block::schema(c, branch(block, BlockKind::Mamba2Mixer, "mamba."));
  // out_proj's bias is projectors_bias; in_proj's mamba_proj_bias (ssm.use_bias).
  specs[Mamba2Block::kOutProjBias].wanted = c.falcon.projectors_bias;
  std::vector<TensorSpec> attention =
      AttentionBlock::schema(c, branch(block, BlockKind::Attention, "self_attn."));
  // llama.cpp's converter takes Falcon-H1's q and k through Mamba2Model, which keeps their rows
  // (its RoPE is the NeoX form, which needs no reordering).
  for (TensorSpec& s : attention) s.gguf_form = GgufForm::Same;
  specs.insert(specs.end(), attention.begin() + 1, attention.end());
  return specs;
}

FalconH1MixerBlock::FalconH1MixerBlock(const ModelConfig& c, const BlockSpec& spec, WeightBinder& binder)
    : Block(BlockKind::FalconH1Mixer, spec),
      d_model_(c.d_model),
      d_inner_(c.ssm.d_inner),
      d_state_(c.ssm.d_state),
      d_conv_(c.ssm.d_conv),
      headdim_(c.ssm.headdim),
      n_heads_(c.ssm.n_heads()),
      n_groups_(c.ssm.ngroups),
      conv_width_(Mamba2Block::conv_width(c)),
      in_proj_rows_(Mamba2Block::in_proj_rows(c)),
      chunk_(c.ssm.chunk_size),
      attn_heads_(c.hybrid.attention.n_heads),
      kv_heads_(c.hybrid.attention.n_kv_heads),
      head_dim_(c.hybrid.attention.head_dim),
      norm_eps_(c.norm_eps),
      dt_min_(static_cast<float>(c.ssm.dt_limit_min)),
      dt_max_(static_cast<float>(c.ssm.dt_limit_max)),
      attn_scale_(static_cast<float>(c.hybrid.attention.scale)),
      rope_theta_(c.hybrid.attention.rope_theta),
      d_per_channel_(false),
      rms_norm_(c.falcon.mamba_rms_norm),
      norm_before_gate_(c.falcon.norm_before_gate),
      ssm_in_(static_cast<float>(c.falcon.ssm_in)),
      ssm_out_(static_cast<float>(c.falcon.ssm_out)),
      attention_in_(static_cast<float>(c.falcon.attention_in)),
      attention_out_(static_cast<float>(c.falcon.attention_out)),
      key_(static_cast<float>(c.falcon.key)) {
  for (size_t i = 0; i < std::size(segment_multipliers_); ++i)
    segment_multipliers_[i] = static_cast<float>(c.falcon.ssm_multipliers.at(i));
  weights_ = bind_weights(binder, schema(c, spec));
  d_per_channel_ = weight(Mamba2Block::kD).bound_alt;
  // A = -exp(A_log) and A * log2(e), as Mamba2Block derives them (see there).
  const Weight& source = weight(Mamba2Block::kALog);
  std::vector<float> a(n_heads_), a_base2(n_heads_);
  for (int64_t h = 0; h < n_heads_; ++h) {
    const double value = source.host_values[h];
    const double exact = source.bound_alt ? value : -std::exp(value);
    a[h] = static_cast<float>(exact);
    a_base2[h] = static_cast<float>(exact * std::numbers::log2e);
  }
  weights_.push_back(derived_weight(binder, std::move(a)));
  weights_.push_back(derived_weight(binder, std::move(a_base2)));
}

std::vector<StatePart> FalconH1MixerBlock::state_parts() const {
  return {{"conv", {d_conv_ - 1, conv_width_}},
          {"ssm", {n_heads_, d_state_, headdim_}},
          {"k", {kv_heads_, head_dim_}, true},
          {"v", {kv_heads_, head_dim_}, true}};
}

std::vector<int64_t> FalconH1MixerBlock::scratch_widths() const {
  const int64_t qw = attn_heads_ * head_dim_, kvw = kv_heads_ * head_dim_;
  return {d_model_, d_model_, in_proj_rows_, conv_width_, d_inner_, d_model_,
          qw,       kvw,      kvw,           qw,          d_model_, d_model_};
}

std::span<const std::string_view> FalconH1MixerBlock::phase_names() const {
  return kMixerPhaseNames;
}

std::vector<OpQuery> FalconH1MixerBlock::ops() const {
  return {{OpKind::RmsNorm},
          {OpKind::Scale},
          {OpKind::Matmul, weight(Mamba2Block::kInProj).host_matrix.dtype},
          {OpKind::Matmul, weight(Mamba2Block::kOutProj).host_matrix.dtype},
          {OpKind::CausalConv, DType::F32, d_conv_},
          {OpKind::Mamba2Scan, DType::F32, d_state_},
          {OpKind::GatedRmsNorm},
          {OpKind::Matmul, weight(attn(AttentionBlock::kQ)).host_matrix.dtype},
          {OpKind::Matmul, weight(attn(AttentionBlock::kO)).host_matrix.dtype},
          {OpKind::Rope},
          {OpKind::AppendRows},
          {OpKind::Attention, DType::F32, head_dim_}};
}

void FalconH1MixerBlock::forward(LayerContext& ctx) const {
  const NormSegment norm{0, d_model_, values(Mamba2Block::kNorm)};
  ctx.backend.rms_norm(ctx.stream, {ctx.hidden, ctx.m, std::span(&norm, 1), norm_eps_, ctx.scratch[kXn],
                                    phase(kMixerNormPhase)});  // [m, d]
  mamba_branch(ctx);                                           // -> out_m [m, d]
  attention_branch(ctx);                                       // -> out_a [m, d]
  // hidden + (mamba * ssm_out + attention * attention_out): the branches' sum first, then the
  // residual, the reference's order (x * 1 is exact, so the last step is a plain addition).
  const View out_m = ctx.scratch[kOutM];
  ctx.backend.scale(ctx.stream,
                    {ctx.scratch[kOutA], ctx.m, d_model_, attention_out_, true, out_m, phase(kSumPhase)});
  ctx.backend.scale(ctx.stream, {out_m, ctx.m, d_model_, 1.0f, true, ctx.hidden, phase(kSumPhase)});
}

void FalconH1MixerBlock::mamba_branch(const LayerContext& ctx) const {
  const Backend& be = ctx.backend;
  Stream& s = ctx.stream;
  const int64_t m = ctx.m, di = d_inner_, gn = n_groups_ * d_state_;
  const View proj = ctx.scratch[kProj], xbc = ctx.scratch[kXbc], y = ctx.scratch[kY];
  View x = ctx.scratch[kXn];
  if (ssm_in_ != 1.0f) {
    be.scale(s, {x, m, d_model_, ssm_in_, false, ctx.scratch[kXs], phase(kInProjPhase)});
    x = ctx.scratch[kXs];
  }
  be.matmul(s, {x,
                m,
                matrix(Mamba2Block::kInProj),
                values(Mamba2Block::kInProjBias),
                proj,
                false,
                false,
                {},
                phase(kInProjPhase)});  // [m, in_proj rows]: z | x | B | C | dt
  // HF's mup_vector: each segment of the product times its multiplier (not folded into in_proj,
  // so a quantized in_proj is the checkpoint's own matrix quantized).
  const int64_t bounds[] = {0, di, 2 * di, 2 * di + gn, 2 * di + 2 * gn, in_proj_rows_};
  for (int i = 0; i < 5; ++i)
    if (segment_multipliers_[i] != 1.0f)
      be.scale(s, {proj.column(bounds[i]), m, bounds[i + 1] - bounds[i], segment_multipliers_[i], false,
                   proj.column(bounds[i]), phase(kInProjPhase)});

  be.causal_conv(s, {proj.column(di), conv_width_, static_cast<int>(d_conv_), values(Mamba2Block::kConv),
                     values(Mamba2Block::kConvBias), state_offset(), xbc, ctx.parts, phase(kConvPhase)});
  Mamba2ScanOp scan;
  scan.n_heads = n_heads_;
  scan.headdim = headdim_;
  scan.d_state = d_state_;
  scan.n_groups = n_groups_;
  scan.dt_bias = values(Mamba2Block::kDtBias);
  scan.a_base2 = values(kDerivedABase2);
  scan.a = values(kDerivedA);
  scan.d_skip = values(Mamba2Block::kD);
  scan.d_skip_per_channel = d_per_channel_;
  scan.dt_min = dt_min_;
  scan.dt_max = dt_max_;
  scan.form = ctx.scan;
  scan.chunk = ctx.ssd_chunk > 0 ? ctx.ssd_chunk : chunk_;
  scan.xbc = xbc;
  scan.dt = proj.column(di + conv_width_);
  scan.y = y;
  scan.state_offset = state_offset() + (d_conv_ - 1) * conv_width_;
  scan.parts = ctx.parts;
  scan.phase = phase(kScanPhase);
  be.mamba2_scan(s, scan);  // -> y [m, d_inner]
  gate(ctx);

  const View out_m = ctx.scratch[kOutM];
  be.matmul(s, {y,
                m,
                matrix(Mamba2Block::kOutProj),
                values(Mamba2Block::kOutProjBias),
                out_m,
                false,
                false,
                {},
                phase(kOutProjPhase)});  // [m, d]
  if (ssm_out_ != 1.0f) be.scale(s, {out_m, m, d_model_, ssm_out_, false, out_m, phase(kOutProjPhase)});
}

// FalconH1RMSNormGated, per group of d_inner / n_groups channels: norm(y * silu(z)) * w, or with
// norm_before_gate norm(y) * w * silu(z); without mamba_rms_norm, y * silu(z) alone.
void FalconH1MixerBlock::gate(const LayerContext& ctx) const {
  const Backend& be = ctx.backend;
  const View y = ctx.scratch[kY], z = ctx.scratch[kProj];
  const int64_t group = d_inner_ / n_groups_;
  const View weight = rms_norm_ ? values(Mamba2Block::kGateNorm) : View{};
  if (!rms_norm_ || !norm_before_gate_) {
    be.gated_rms_norm(ctx.stream,
                      {y, z, ctx.m, d_inner_, group, weight, norm_eps_, y, phase(kGateNormPhase)});
    return;
  }
  // The groups' norms, kMaxNormSegments at a time, then the gate alone.
  NormSegment segments[kMaxNormSegments];
  for (int64_t g0 = 0; g0 < n_groups_; g0 += kMaxNormSegments) {
    const int64_t count = std::min<int64_t>(kMaxNormSegments, n_groups_ - g0);
    for (int64_t i = 0; i < count; ++i)
      segments[i] = {(g0 + i) * group, group, weight.column((g0 + i) * group)};
    be.rms_norm(ctx.stream, {y, ctx.m, std::span(segments, static_cast<size_t>(count)), norm_eps_, y,
                             phase(kGateNormPhase)});
  }
  be.gated_rms_norm(ctx.stream, {y, z, ctx.m, d_inner_, group, View{}, norm_eps_, y, phase(kGateNormPhase)});
}

void FalconH1MixerBlock::attention_branch(const LayerContext& ctx) const {
  const Backend& be = ctx.backend;
  Stream& s = ctx.stream;
  const int64_t m = ctx.m, kvw = kv_heads_ * head_dim_;
  const View q = ctx.scratch[kQRows], k = ctx.scratch[kKRows], v = ctx.scratch[kVRows], y = ctx.scratch[kYa];
  View x = ctx.scratch[kXn];
  if (attention_in_ != 1.0f) {
    be.scale(s, {x, m, d_model_, attention_in_, false, ctx.scratch[kXa], phase(kQkvPhase)});
    x = ctx.scratch[kXa];
  }
  using A = AttentionBlock;
  be.matmul(s, {x, m, matrix(attn(A::kQ)), values(attn(A::kQBias)), q, false, false, {}, phase(kQkvPhase)});
  be.matmul(s, {x, m, matrix(attn(A::kK)), values(attn(A::kKBias)), k, false, false, {}, phase(kQkvPhase)});
  be.matmul(s, {x, m, matrix(attn(A::kV)), values(attn(A::kVBias)), v, false, false, {}, phase(kQkvPhase)});
  // The keys times key_multiplier before RoPE, as FalconH1Attention does.
  if (key_ != 1.0f) be.scale(s, {k, m, kvw, key_, false, k, phase(kQkvPhase)});
  if (rope_theta_ > 0.0)
    be.rope(s, {head_dim_, rope_theta_, q, attn_heads_, k, kv_heads_, ctx.parts, phase(kRopePhase)});
  // Parts 2 and 3 of the layer are the growing keys and values (after the fixed conv and ssm).
  const std::vector<StatePart>& parts = state_layout().parts;
  be.append_rows(s, {k, kvw, parts[2].offset, ctx.parts, phase(kAppendPhase)});
  be.append_rows(s, {v, kvw, parts[3].offset, ctx.parts, phase(kAppendPhase)});
  be.attention(s, {attn_heads_, kv_heads_, head_dim_, attn_scale_, q, parts[2].offset, parts[3].offset, y,
                   ctx.parts, phase(kAttentionPhase)});
  be.matmul(s, {y,
                m,
                matrix(attn(A::kO)),
                values(attn(A::kOBias)),
                ctx.scratch[kOutA],
                false,
                false,
                {},
                phase(kOProjPhase)});  // [m, d]
}

// ---- The MLP ----

namespace {

enum MlpPhase : int { kMlpNormPhase, kGateUpPhase, kActivationPhase, kDownPhase };
constexpr std::string_view kMlpPhaseNames[] = {"rmsnorm", "gate+up gemm", "activation", "down gemm+residual"};
static_assert(std::size(kMlpPhaseNames) == kDownPhase + 1);

enum MlpScratch : size_t { kMlpXn, kGateUp, kMlpOut };

TensorSpec falcon_matrix(const BlockSpec& block, const char* name, int64_t rows, int64_t cols, double bound,
                         const char* gguf) {
  return {.name = block.tensor(std::string(name) + ".weight"),
          .shape = {rows, cols},
          .role = TensorRole::Matrix,
          .init = {TensorInit::Uniform, bound},
          .gguf = block.gguf(std::string(gguf) + ".weight")};
}

TensorSpec falcon_bias(const BlockSpec& block, const char* name, int64_t rows, bool wanted,
                       const char* gguf) {
  return {.name = block.tensor(std::string(name) + ".bias"),
          .shape = {rows},
          .init = {TensorInit::Uniform, 0.1},
          .wanted = wanted,
          .gguf = block.gguf(std::string(gguf) + ".bias")};
}

}  // namespace

std::vector<TensorSpec> FalconH1MlpBlock::schema(const ModelConfig& c, const BlockSpec& block) {
  const int64_t d = c.d_model, w = c.hybrid.mlp.width;
  const bool b = c.hybrid.mlp.bias;
  const double in_bound = std::sqrt(3.0 / static_cast<double>(d));
  const double down_bound =
      std::sqrt(3.0 / static_cast<double>(w)) / std::sqrt(static_cast<double>(c.n_layer));
  // llama.cpp names the pre-FF norm "blk.N.ffn_norm" without ".weight" (gguf-py maps the full HF
  // name, FFN_PRE_NORM, and its loader asks for that name).
  TensorSpec norm{.name = block.norm(), .shape = {d}, .gguf = block.gguf(block.names.gguf_norm)};
  return {norm,
          falcon_matrix(block, "gate_proj", w, d, in_bound, "ffn_gate"),
          falcon_bias(block, "gate_proj", w, b, "ffn_gate"),
          falcon_matrix(block, "up_proj", w, d, in_bound, "ffn_up"),
          falcon_bias(block, "up_proj", w, b, "ffn_up"),
          falcon_matrix(block, "down_proj", d, w, down_bound, "ffn_down"),
          falcon_bias(block, "down_proj", d, b, "ffn_down")};
}

FalconH1MlpBlock::FalconH1MlpBlock(const ModelConfig& c, const BlockSpec& spec, WeightBinder& binder)
    : Block(BlockKind::FalconH1Mlp, spec),
      d_model_(c.d_model),
      width_(c.hybrid.mlp.width),
      norm_eps_(c.norm_eps),
      gate_multiplier_(static_cast<float>(c.falcon.mlp_multipliers.at(0))),
      down_multiplier_(static_cast<float>(c.falcon.mlp_multipliers.at(1))) {
  weights_ = bind_weights(binder, schema(c, spec));
}

std::vector<int64_t> FalconH1MlpBlock::scratch_widths() const {
  return {d_model_, 2 * width_, d_model_};
}

std::span<const std::string_view> FalconH1MlpBlock::phase_names() const {
  return kMlpPhaseNames;
}

std::vector<OpQuery> FalconH1MlpBlock::ops() const {
  return {{OpKind::RmsNorm},
          {OpKind::Matmul, weight(kGate).host_matrix.dtype},
          {OpKind::Matmul, weight(kDown).host_matrix.dtype},
          {OpKind::Glu},
          {OpKind::Scale}};
}

void FalconH1MlpBlock::forward(LayerContext& ctx) const {
  const Backend& be = ctx.backend;
  Stream& s = ctx.stream;
  const int64_t m = ctx.m;
  const View xn = ctx.scratch[kMlpXn], gate_up = ctx.scratch[kGateUp];
  const NormSegment norm{0, d_model_, values(kNorm)};
  be.rms_norm(s, {ctx.hidden, m, std::span(&norm, 1), norm_eps_, xn, phase(kMlpNormPhase)});
  // gate | up in one [m, 2 W] buffer, the form glu reads.
  be.matmul(s, {xn, m, matrix(kGate), values(kGateBias), gate_up, false, false, {}, phase(kGateUpPhase)});
  be.matmul(
      s,
      {xn, m, matrix(kUp), values(kUpBias), gate_up.column(width_), false, false, {}, phase(kGateUpPhase)});
  if (gate_multiplier_ != 1.0f)
    be.scale(s, {gate_up, m, width_, gate_multiplier_, false, gate_up, phase(kActivationPhase)});
  be.glu(s, {gate_up, m, width_, Activation::SwiGlu, gate_up, phase(kActivationPhase)});  // -> [m, W]
  add_to_residual(ctx, gate_up, matrix(kDown), values(kDownBias), down_multiplier_, ctx.scratch[kMlpOut],
                  phase(kDownPhase));
}

}  // namespace mb

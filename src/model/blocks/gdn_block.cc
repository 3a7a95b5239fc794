// SPDX-License-Identifier: MIT
#include "model/blocks/gdn_block.h"

#include <algorithm>
#include <cmath>
#include <iterator>

#include "model/weight_binder.h"

namespace mb {
namespace {

enum Phase : int { kNormPhase, kInProjPhase, kConvPhase, kGdnPhase, kGatePhase, kOutProjPhase };
constexpr std::string_view kPhaseNames[] = {"rmsnorm",         "in_proj gemm", "conv",
                                            "gated delta net", "gated norm",   "out_proj gemm+residual"};
static_assert(std::size(kPhaseNames) == kOutProjPhase + 1);

// Scratch buffers, in the order of scratch_widths(): xn [d] | proj [conv width + nv dv + 2 nv]:
// qkv | z | b | a | conv outputs [conv width] | y [nv dv].
enum Scratch : size_t { kXn, kProj, kConvOut, kY };

TensorSpec gdn_tensor(const BlockSpec& block, const std::string& name, std::vector<int64_t> shape,
                      TensorRole role, TensorInit init, const std::string& gguf) {
  return {.name = block.tensor(name),
          .shape = std::move(shape),
          .role = role,
          .init = init,
          .gguf = block.gguf(gguf)};
}

}  // namespace

std::vector<TensorSpec> GdnBlock::schema(const ModelConfig& c, const BlockSpec& block) {
  const Qwen35Config& q = c.qwen35;
  const int64_t d = c.d_model, nv = q.n_value_heads, vw = nv * q.value_dim, cw = q.conv_width();
  // Unit-variance products for unit-variance inputs; out_proj, a residual branch, is scaled down
  // by sqrt(n_layer) as the other blocks' are.
  const TensorInit in{TensorInit::Uniform, std::sqrt(3.0 / static_cast<double>(d))};
  const TensorInit out{TensorInit::Uniform,
                       std::sqrt(3.0 / static_cast<double>(vw)) / std::sqrt(static_cast<double>(c.n_layer))};
  TensorSpec norm{.name = block.norm(),
                  .shape = {d},
                  .init = {TensorInit::Uniform, 0.2},
                  .gguf = block.gguf(block.names.gguf_norm)};
  norm.zero_centred = true;
  TensorSpec conv = gdn_tensor(block, "conv1d.weight", {cw, 1, q.conv_kernel}, TensorRole::ConvTaps,
                               {TensorInit::Uniform, 1.0 / std::sqrt(static_cast<double>(q.conv_kernel))},
                               "ssm_conv1d.weight");
  conv.gguf_form = GgufForm::SqueezedConv;
  TensorSpec dt_bias =
      gdn_tensor(block, "dt_bias", {nv}, TensorRole::Vector, {TensorInit::DtBias}, "ssm_dt.bias");
  dt_bias.keep_f32 = true;
  TensorSpec a_log = gdn_tensor(block, "A_log", {nv}, TensorRole::Vector, {TensorInit::LogUniformA}, "ssm_a");
  a_log.keep_f32 = true;
  a_log.gguf_negexp_name = block.tensor("A");
  return {norm,
          gdn_tensor(block, "in_proj_qkv.weight", {cw, d}, TensorRole::Matrix, in, "attn_qkv.weight"),
          gdn_tensor(block, "in_proj_z.weight", {vw, d}, TensorRole::Matrix, in, "attn_gate.weight"),
          gdn_tensor(block, "in_proj_b.weight", {nv, d}, TensorRole::Matrix, in, "ssm_beta.weight"),
          gdn_tensor(block, "in_proj_a.weight", {nv, d}, TensorRole::Matrix, in, "ssm_alpha.weight"),
          conv,
          dt_bias,
          a_log,
          gdn_tensor(block, "norm.weight", {q.value_dim}, TensorRole::Vector, {TensorInit::AroundOne, 0.2},
                     "ssm_norm.weight"),
          gdn_tensor(block, "out_proj.weight", {d, vw}, TensorRole::Matrix, out, "ssm_out.weight")};
}

GdnBlock::GdnBlock(const ModelConfig& c, const BlockSpec& spec, WeightBinder& binder)
    : Block(BlockKind::GatedDeltaNet, spec),
      d_model_(c.d_model),
      nk_(c.qwen35.n_key_heads),
      nv_(c.qwen35.n_value_heads),
      dk_(c.qwen35.key_dim),
      dv_(c.qwen35.value_dim),
      kernel_(c.qwen35.conv_kernel),
      conv_width_(c.qwen35.conv_width()),
      tiled_heads_(c.qwen35.tiled_heads),
      norm_eps_(c.norm_eps) {
  weights_ = bind_weights(binder, schema(c, spec));
  // -exp(A_log) in double, rounded once (HF computes it in f32: within the tolerance); a GGUF
  // file holds that value already.
  const Weight& source = weight(kALog);
  std::vector<float> a_neg(static_cast<size_t>(nv_));
  for (int64_t h = 0; h < nv_; ++h) {
    const double value = source.host_values[h];
    a_neg[static_cast<size_t>(h)] = static_cast<float>(source.bound_alt ? value : -std::exp(value));
  }
  weights_.push_back(derived_weight(binder, std::move(a_neg)));
}

std::vector<StatePart> GdnBlock::state_parts() const {
  return {{"conv", {kernel_ - 1, conv_width_}}, {"gdn", {nv_, dv_, dk_}}};
}

std::vector<int64_t> GdnBlock::scratch_widths() const {
  return {d_model_, conv_width_ + nv_ * dv_ + 2 * nv_, conv_width_, nv_ * dv_};
}

std::span<const std::string_view> GdnBlock::phase_names() const {
  return kPhaseNames;
}

std::vector<OpQuery> GdnBlock::ops() const {
  return {{OpKind::RmsNorm},
          {OpKind::Matmul, weight(kInQkv).host_matrix.dtype},
          {OpKind::Matmul, weight(kInZ).host_matrix.dtype},
          {OpKind::Matmul, weight(kInB).host_matrix.dtype},
          {OpKind::Matmul, weight(kInA).host_matrix.dtype},
          {OpKind::Matmul, weight(kOutProj).host_matrix.dtype},
          {OpKind::CausalConv, DType::F32, kernel_},
          {OpKind::GatedDeltaNet, DType::F32, dk_},
          {OpKind::GatedRmsNorm}};
}

void GdnBlock::gate(const LayerContext& ctx, View y, View z) const {
  const Backend& be = ctx.backend;
  const View weight = values(kGateNorm);
  NormSegment segments[kMaxNormSegments];
  for (int64_t h0 = 0; h0 < nv_; h0 += kMaxNormSegments) {
    const int64_t count = std::min<int64_t>(kMaxNormSegments, nv_ - h0);
    for (int64_t i = 0; i < count; ++i) segments[i] = {(h0 + i) * dv_, dv_, weight};
    be.rms_norm(ctx.stream,
                {y, ctx.m, std::span(segments, static_cast<size_t>(count)), norm_eps_, y, phase(kGatePhase)});
  }
  // Then the gate alone: y * silu(z).
  be.gated_rms_norm(ctx.stream, {y, z, ctx.m, nv_ * dv_, dv_, View{}, norm_eps_, y, phase(kGatePhase)});
}

void GdnBlock::forward(LayerContext& ctx) const {
  const Backend& be = ctx.backend;
  Stream& s = ctx.stream;
  const int64_t m = ctx.m, vw = nv_ * dv_;
  const View xn = ctx.scratch[kXn], proj = ctx.scratch[kProj], c = ctx.scratch[kConvOut], y = ctx.scratch[kY];
  const View z = proj.column(conv_width_), b = z.column(vw), a = b.column(nv_);
  const NormSegment norm{0, d_model_, values(kNorm)};
  be.rms_norm(s, {ctx.hidden, m, std::span(&norm, 1), norm_eps_, xn, phase(kNormPhase)});  // [m, d]
  // The four products share their input: side by side in one row of proj.
  be.matmul(s, {xn, m, matrix(kInQkv), {}, proj, false, false, {}, phase(kInProjPhase)});
  be.matmul(s, {xn, m, matrix(kInZ), {}, z, false, false, {}, phase(kInProjPhase)});
  be.matmul(s, {xn, m, matrix(kInB), {}, b, false, false, {}, phase(kInProjPhase)});
  be.matmul(s, {xn, m, matrix(kInA), {}, a, false, false, {}, phase(kInProjPhase)});
  be.causal_conv(s, {proj, conv_width_, static_cast<int>(kernel_), values(kConv), View{}, state_offset(), c,
                     ctx.parts, phase(kConvPhase)});  // q | k | v -> c [m, conv width], SiLU applied
  GatedDeltaNetOp gdn;
  gdn.n_key_heads = nk_;
  gdn.n_value_heads = nv_;
  gdn.key_dim = dk_;
  gdn.value_dim = dv_;
  gdn.tiled_heads = tiled_heads_;
  gdn.qkv = c;
  gdn.b = b;
  gdn.a = a;
  gdn.a_neg = values(kANeg);
  gdn.dt_bias = values(kDtBias);
  gdn.state_offset = state_offset() + (kernel_ - 1) * conv_width_;  // after the conv history
  gdn.y = y;
  gdn.parts = ctx.parts;
  gdn.phase = phase(kGdnPhase);
  be.gated_delta_net(s, gdn);  // -> y [m, nv dv]
  gate(ctx, y, z);
  add_to_residual(ctx, y, matrix(kOutProj), {}, 1.0f, {}, phase(kOutProjPhase));
}

}  // namespace mb

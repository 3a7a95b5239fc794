// SPDX-License-Identifier: MIT
#include "model/blocks/mamba2_block.h"

#include <cmath>
#include <iterator>
#include <numbers>

#include "model/blocks/mamba_schema.h"
#include "model/weight_binder.h"

namespace mb {
namespace {

// The block's phases, local ids in the order of kPhaseNames.
enum Phase : int { kNormPhase, kInProjPhase, kConvPhase, kScanPhase, kGateNormPhase, kOutProjPhase };
constexpr std::string_view kPhaseNames[] = {"rmsnorm",  "in_proj gemm",  "conv+silu",
                                            "ssd scan", "gated rmsnorm", "out_proj gemm+residual"};
static_assert(std::size(kPhaseNames) == kOutProjPhase + 1);

// Scratch buffers, in the order of scratch_widths().
enum Scratch : size_t { kXn, kProj, kXbc, kY, kOut };

}  // namespace

std::vector<TensorSpec> Mamba2Block::schema(const ModelConfig& c, const BlockSpec& block) {
  namespace ms = mamba_schema;
  const int64_t d = c.d_model, di = c.ssm.d_inner, H = c.ssm.n_heads(), W = conv_width(c),
                ip = in_proj_rows(c);
  TensorSpec d_skip = ms::d_skip(block, {H}, GgufForm::UnitColumn);
  d_skip.alt_shape = {di};  // one D per channel (D_has_hdim)
  return {
      ms::norm(block, d),
      ms::in_proj(block, ip, d),
      ms::in_proj_bias(block, ip, c.ssm.use_bias),
      ms::conv(block, W, c.ssm.d_conv),
      ms::conv_bias(block, W, c.ssm.use_conv_bias),
      ms::dt_bias(block, H),
      ms::a_log(block, {H}, {TensorInit::LogUniformA}),
      d_skip,
      // The gated-norm weights are drawn around 1, so a norm applied to the wrong channels shows
      // in the outputs.
      ms::gate_norm(block, di, {TensorInit::AroundOne, 0.5}, c.ssm.gated_norm),
      ms::out_proj(block, d, di, c.n_layer),
      ms::out_proj_bias(block, d, c.ssm.use_bias),
  };
}

Mamba2Block::Mamba2Block(const ModelConfig& c, const BlockSpec& spec, WeightBinder& binder)
    : Block(BlockKind::Mamba2Mixer, spec),
      d_model_(c.d_model),
      d_inner_(c.ssm.d_inner),
      d_state_(c.ssm.d_state),
      d_conv_(c.ssm.d_conv),
      headdim_(c.ssm.headdim),
      n_heads_(c.ssm.n_heads()),
      n_groups_(c.ssm.ngroups),
      conv_width_(conv_width(c)),
      in_proj_rows_(in_proj_rows(c)),
      chunk_(c.ssm.chunk_size),
      norm_eps_(c.norm_eps),
      dt_min_(static_cast<float>(c.ssm.dt_limit_min)),
      dt_max_(static_cast<float>(c.ssm.dt_limit_max)),
      residual_multiplier_(static_cast<float>(c.hybrid.residual_multiplier)) {
  weights_ = bind_weights(binder, schema(c, spec));
  d_per_channel_ = weight(kD).bound_alt;
  // A = -exp(A_log), for the chunked form, and premultiplied by log2(e) (in double, one
  // rounding) for the sequential form's base-2 decay. GGUF files hold A itself, the same f32
  // as `a` here when written from A_log; the base-2 form then takes a second rounding and may
  // differ from the A_log path's in the last bit.
  const Weight& source = weight(kALog);
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

std::vector<StatePart> Mamba2Block::state_parts() const {
  return {{"conv", {d_conv_ - 1, conv_width_}}, {"ssm", {n_heads_, d_state_, headdim_}}};
}

std::vector<int64_t> Mamba2Block::scratch_widths() const {
  // xn [d] | proj [in_proj rows]: z | xBC | dt | xbc [conv_width] conv outputs | y [d_inner]
  // | out [d], the scaled branch of a hybrid with a residual multiplier
  std::vector<int64_t> widths = {d_model_, in_proj_rows_, conv_width_, d_inner_};
  if (residual_multiplier_ != 1.0f) widths.push_back(d_model_);
  return widths;
}

std::span<const std::string_view> Mamba2Block::phase_names() const {
  return kPhaseNames;
}

std::vector<OpQuery> Mamba2Block::ops() const {
  std::vector<OpQuery> ops = {{OpKind::Matmul, weight(kInProj).host_matrix.dtype},
                              {OpKind::Matmul, weight(kOutProj).host_matrix.dtype},
                              {OpKind::CausalConv, DType::F32, d_conv_},
                              {OpKind::Mamba2Scan, DType::F32, d_state_},
                              {OpKind::GatedRmsNorm}};
  if (residual_multiplier_ != 1.0f) ops.push_back({OpKind::Scale});
  return ops;
}

void Mamba2Block::forward(LayerContext& ctx) const {
  const Backend& be = ctx.backend;
  Stream& s = ctx.stream;
  const int64_t m = ctx.m, di = d_inner_;
  const View xn = ctx.scratch[kXn], proj = ctx.scratch[kProj], xbc = ctx.scratch[kXbc], y = ctx.scratch[kY];

  const MatmulOp in_proj{.x = ctx.mixer_input ? ctx.mixer_input : ctx.hidden,
                         .m = m,
                         .w = matrix(kInProj),
                         .bias = values(kInProjBias),
                         .y = proj,
                         .norm = {values(kNorm), norm_eps_, xn, phase(kNormPhase)},
                         .phase = phase(kInProjPhase)};
  be.matmul(s, in_proj);  // rms_norm([m, d]) -> proj [m, in_proj rows]

  be.causal_conv(s,
                 {proj.column(di), conv_width_, static_cast<int>(d_conv_), values(kConv), values(kConvBias),
                  state_offset(), xbc, ctx.parts, phase(kConvPhase)});  // xBC of proj -> xbc [m, W]

  Mamba2ScanOp scan;
  scan.n_heads = n_heads_;
  scan.headdim = headdim_;
  scan.d_state = d_state_;
  scan.n_groups = n_groups_;
  scan.dt_bias = values(kDtBias);
  scan.a_base2 = values(kABase2);
  scan.a = values(kA);
  scan.d_skip = values(kD);
  scan.d_skip_per_channel = d_per_channel_;
  scan.dt_min = dt_min_;
  scan.dt_max = dt_max_;
  scan.form = ctx.scan;
  scan.chunk = ctx.ssd_chunk > 0 ? ctx.ssd_chunk : chunk_;
  scan.xbc = xbc;
  scan.dt = proj.column(di + conv_width_);  // [m, H], replaced by the clamped softplus
  scan.y = y;
  scan.state_offset = state_offset() + (d_conv_ - 1) * conv_width_;  // SSM state [H, N, P]
  scan.parts = ctx.parts;
  scan.phase = phase(kScanPhase);
  be.mamba2_scan(s, scan);  // -> y [m, d_inner] before the gate

  be.gated_rms_norm(s, {y, proj, m, di, di / n_groups_, values(kGateNorm), norm_eps_, y,
                        phase(kGateNormPhase)});  // y = norm(y * silu(z)) per group, in place

  const View out = residual_multiplier_ != 1.0f ? ctx.scratch[kOut] : View{};
  add_to_residual(ctx, y, matrix(kOutProj), values(kOutProjBias), residual_multiplier_, out,
                  phase(kOutProjPhase));  // residual += [m, di] -> [m, d]
}

}  // namespace mb

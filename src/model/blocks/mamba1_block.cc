// SPDX-License-Identifier: MIT
#include "model/blocks/mamba1_block.h"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <numbers>

#include "model/blocks/mamba_schema.h"
#include "model/weight_binder.h"

namespace mb {
namespace {

// The block's phases, local ids in the order of kPhaseNames. The names are the ones `bench
// --profile` printed before blocks named their phases.
enum Phase : int {
  kNormPhase,
  kInProjPhase,
  kConvPhase,
  kXProjPhase,
  kDtProjPhase,
  kScanPhase,
  kOutProjPhase
};
constexpr std::string_view kPhaseNames[] = {"rmsnorm",
                                            "in_proj gemm",
                                            "conv+silu",
                                            "x_proj gemm",
                                            "dt_proj gemm+softplus",
                                            "selective scan+gate",
                                            "out_proj gemm+residual"};
static_assert(std::size(kPhaseNames) == kOutProjPhase + 1);

// Scratch buffers, in the order of scratch_widths().
enum Scratch : size_t { kXn, kXz, kU, kXdbl, kDt, kY };

}  // namespace

std::vector<TensorSpec> Mamba1Block::schema(const ModelConfig& c, const BlockSpec& block) {
  namespace ms = mamba_schema;
  const int64_t d = c.d_model, D = c.ssm.d_inner, N = c.ssm.d_state, R = c.ssm.dt_rank, K = c.ssm.d_conv;
  TensorSpec x_proj, dt_proj, dt_bias;
  x_proj.name = block.tensor("x_proj.weight");
  x_proj.shape = {R + 2 * N, D};
  x_proj.role = TensorRole::Matrix;
  x_proj.init = {TensorInit::Uniform, 1.0 / std::sqrt(static_cast<double>(D))};
  x_proj.gguf = block.gguf("ssm_x.weight");
  dt_proj.name = block.tensor("dt_proj.weight");
  dt_proj.shape = {D, R};
  dt_proj.role = TensorRole::Matrix;
  dt_proj.init = {TensorInit::Uniform, 1.0 / std::sqrt(static_cast<double>(R))};
  dt_proj.gguf = block.gguf("ssm_dt.weight");
  dt_bias = ms::dt_bias(block, D);
  dt_bias.name = block.tensor("dt_proj.bias");  // Mamba-1 keeps dt's bias with dt_proj
  // Jamba's learned mixer-norm weights (llama.cpp: ssm_dt_norm, ssm_b_norm, ssm_c_norm).
  const bool norm_weights = c.ssm.mixer_rms_norm && c.ssm.mixer_norm_weights;
  const auto mixer_norm = [&](const char* name, int64_t width, const char* gguf) {
    return TensorSpec{.name = block.tensor(name),
                      .shape = {width},
                      .init = {TensorInit::AroundOne, 0.5},
                      .wanted = norm_weights,
                      .gguf = block.gguf(gguf)};
  };
  std::vector<TensorSpec> specs = {
      ms::norm(block, d),
      ms::in_proj(block, 2 * D, d),
      ms::in_proj_bias(block, 2 * D, c.ssm.use_bias),
      ms::conv(block, D, K),
      ms::conv_bias(block, D, c.ssm.use_conv_bias),
      x_proj,
      dt_proj,
      dt_bias,
      ms::a_log(block, {D, N}, {TensorInit::LogStateIndex}),
      ms::d_skip(block, {D}, GgufForm::Same),
      ms::out_proj(block, d, D, c.n_layer),
      ms::out_proj_bias(block, d, c.ssm.use_bias),
      mixer_norm("dt_layernorm.weight", R, "ssm_dt_norm.weight"),
      mixer_norm("b_layernorm.weight", N, "ssm_b_norm.weight"),
      mixer_norm("c_layernorm.weight", N, "ssm_c_norm.weight"),
  };
  return specs;
}

Mamba1Block::Mamba1Block(const ModelConfig& c, const BlockSpec& spec, WeightBinder& binder)
    : Block(BlockKind::Mamba1Mixer, spec),
      d_model_(c.d_model),
      d_inner_(c.ssm.d_inner),
      d_state_(c.ssm.d_state),
      dt_rank_(c.ssm.dt_rank),
      d_conv_(c.ssm.d_conv),
      norm_eps_(c.norm_eps),
      mixer_norm_(c.ssm.mixer_rms_norm),
      mixer_norm_weights_(c.ssm.mixer_rms_norm && c.ssm.mixer_norm_weights),
      mixer_norm_eps_(static_cast<float>(c.ssm.mixer_rms_eps)) {
  weights_ = bind_weights(binder, schema(c, spec));
  // A = -exp(A_log), kept premultiplied by log2(e) (in double, one rounding) and re-laid out
  // state-major once, so the scan reads sixteen channels per load. GGUF files hold A itself, an
  // f32 already rounded once, so from them the product takes a second rounding: a_base2 may
  // then differ from the A_log path's in the last bit.
  const int64_t D = d_inner_, N = d_state_;
  const Weight& a = weight(kALog);
  std::vector<float> a_base2(N * D);
  for (int64_t ch = 0; ch < D; ++ch) {
    for (int64_t n = 0; n < N; ++n) {
      const double value = a.host_values[ch * N + n];
      const double decay = a.bound_alt ? value : -std::exp(value);
      a_base2[n * D + ch] = static_cast<float>(decay * std::numbers::log2e);
    }
  }
  weights_.push_back(derived_weight(binder, std::move(a_base2)));
  // FalconMamba's mixer norm has no weight; the shared RMSNorm op multiplies by ones (x * 1.0f
  // is exact).
  weights_.push_back(mixer_norm_ && !mixer_norm_weights_
                         ? derived_weight(binder, std::vector<float>(std::max(dt_rank_, N), 1.0f))
                         : Weight{});
}

std::vector<StatePart> Mamba1Block::state_parts() const {
  return {{"conv", {d_conv_ - 1, d_inner_}}, {"ssm", {d_state_, d_inner_}}};
}

std::vector<int64_t> Mamba1Block::scratch_widths() const {
  // xn [d] | xz [2D] | u [D] | xdbl [R + 2N] | dt [D] | y [D]
  return {d_model_, 2 * d_inner_, d_inner_, dt_rank_ + 2 * d_state_, d_inner_, d_inner_};
}

std::span<const std::string_view> Mamba1Block::phase_names() const {
  return kPhaseNames;
}

std::vector<OpQuery> Mamba1Block::ops() const {
  std::vector<OpQuery> ops;
  for (size_t m : {kInProj, kXProj, kDtProj, kOutProj})
    ops.push_back({OpKind::Matmul, weight(m).host_matrix.dtype});
  ops.push_back({OpKind::CausalConv, DType::F32, d_conv_});
  ops.push_back({OpKind::SelectiveScan, DType::F32, d_state_});
  if (mixer_norm_) ops.push_back({OpKind::RmsNorm});
  return ops;
}

void Mamba1Block::forward(LayerContext& ctx) const {
  const Backend& be = ctx.backend;
  Stream& s = ctx.stream;
  const int64_t m = ctx.m, D = d_inner_, N = d_state_, R = dt_rank_;
  const View xn = ctx.scratch[kXn], xz = ctx.scratch[kXz], u = ctx.scratch[kU], xdbl = ctx.scratch[kXdbl],
             dt = ctx.scratch[kDt], y = ctx.scratch[kY];

  const MatmulOp in_proj{.x = ctx.hidden,
                         .m = m,
                         .w = matrix(kInProj),
                         .bias = values(kInProjBias),
                         .y = xz,
                         .norm = {values(kNorm), norm_eps_, xn, phase(kNormPhase)},
                         .phase = phase(kInProjPhase)};
  be.matmul(s, in_proj);  // rms_norm([m, d]) x [2D, d]^T -> xz [m, 2D]

  CausalConvOp conv{
      xz, D,         static_cast<int>(d_conv_), values(kConv), values(kConvBias), state_offset(),
      u,  ctx.parts, phase(kConvPhase)};
  be.causal_conv(s, conv);  // x half of xz -> u [m, D], history [K - 1, D] carried

  be.matmul(s, {u, m, matrix(kXProj), {}, xdbl, false, false, {}, phase(kXProjPhase)});  // -> [m, R + 2N]
  if (mixer_norm_) {
    // FalconMamba and Jamba normalize dt_low, B and C each over its own width, in place, per row:
    // FalconMamba's norm has no weight (ones), Jamba's has one per part.
    const View ones = values(kMixerNormOnes);
    const bool w = mixer_norm_weights_;
    const NormSegment segments[] = {{0, R, w ? values(kDtNorm) : ones},
                                    {R, N, w ? values(kBNorm) : ones},
                                    {R + N, N, w ? values(kCNorm) : ones}};
    be.rms_norm(s, {xdbl, m, segments, mixer_norm_eps_, xdbl, phase(kNormPhase)});
  }

  const ScanDtProj dt_proj{matrix(kDtProj), values(kDtBias), xdbl, m, phase(kDtProjPhase)};
  SelectiveScanOp scan;
  scan.channels = D;
  scan.d_state = N;
  scan.u = u;
  scan.dt = dt;  // softplus(dt_low W_dt^T + b) [m, D]
  scan.b = xdbl.column(R);
  scan.c = xdbl.column(R + N);
  scan.z = xz.column(D);
  scan.a_base2 = values(kABase2);
  scan.d_skip = values(kD);
  scan.state_offset = state_offset() + (d_conv_ - 1) * D;  // SSM state [N, D]
  scan.y = y;
  scan.parts = ctx.parts;
  scan.dt_proj = &dt_proj;
  scan.phase = phase(kScanPhase);
  be.selective_scan(s, scan);  // -> gated y [m, D]

  be.matmul(s, {y,
                m,
                matrix(kOutProj),
                values(kOutProjBias),
                ctx.hidden,
                true,
                false,
                {},
                phase(kOutProjPhase)});  // residual += [m, D] -> [m, d]
}

}  // namespace mb

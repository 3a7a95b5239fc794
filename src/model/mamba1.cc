#include "model/mamba1.h"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <numbers>
#include <string>
#include <utility>

#include "core/error.h"
#include "core/profile.h"
#include "io/safetensors.h"
#include "model/weight_binder.h"
#include "ops/activations.h"
#include "ops/rms_norm.h"

namespace mb {
namespace {

// The layer phases of a profile, ids from kFirstLayerPhase in the order of kPhaseNames. The
// names are the ones `bench --profile` printed before architectures named their phases.
enum Mamba1Phase : PhaseId { kNorm = kFirstLayerPhase, kInProj, kConv, kXProj, kDtProj, kScan, kOutProj };
constexpr std::string_view kPhaseNames[] = {"rmsnorm",
                                            "in_proj gemm",
                                            "conv+silu",
                                            "x_proj gemm",
                                            "dt_proj gemm+softplus",
                                            "selective scan+gate",
                                            "out_proj gemm+residual"};
static_assert(std::size(kPhaseNames) == kOutProj - kFirstLayerPhase + 1);

// Per-sequence op arguments of a round, reused across calls.
struct Mamba1Scratch final : LayerScratch {
  std::vector<CausalConvArgs> conv;
  std::vector<SelectiveScanArgs> scan;
};

}  // namespace

Mamba1Model::Mamba1Model(const ModelConfig& config, std::shared_ptr<const TensorSet> tensors,
                         const LoadOptions& options) {
  WeightBinder& binder = bind_common(config, std::move(tensors), options);

  const int64_t d = config.d_model, D = config.d_inner, N = config.d_state, R = config.dt_rank,
                K = config.d_conv;
  if (config.mixer_rms_norm) mixer_norm_ones_ = binder.keep(std::vector<float>(std::max(R, N), 1.0f));

  layers_.resize(config.n_layer);
  for (int64_t l = 0; l < config.n_layer; ++l) {
    state_layout_.add_layer({{"conv", {K - 1, D}}, {"ssm", {N, D}}});  // kConvPart, kSsmPart
    const std::string p = "backbone.layers." + std::to_string(l) + ".";
    const std::string mixer = p + "mixer.";
    Mamba1Layer& layer = layers_[l];
    layer.norm = binder.f32(p + "norm.weight", {d});
    layer.in_proj = binder.matrix(mixer + "in_proj.weight", 2 * D, d);
    layer.x_proj = binder.matrix(mixer + "x_proj.weight", R + 2 * N, D);
    layer.dt_proj = binder.matrix(mixer + "dt_proj.weight", D, R);
    layer.dt_bias = binder.f32(mixer + "dt_proj.bias", {D});
    layer.d_skip = binder.f32(mixer + "D", {D});
    layer.out_proj = binder.matrix(mixer + "out_proj.weight", d, D);
    if (config_.use_bias) {
      layer.in_proj_bias = binder.f32(mixer + "in_proj.bias", {2 * D});
      layer.out_proj_bias = binder.f32(mixer + "out_proj.bias", {d});
    }
    if (config_.use_conv_bias) layer.conv_bias = binder.f32(mixer + "conv1d.bias", {D});

    layer.conv_weight = binder.conv_taps(mixer + "conv1d.weight", D, K);

    // A = -exp(A_log), kept premultiplied by log2(e) (in double, one rounding) and re-laid out
    // state-major once, so the scan reads sixteen channels per load. GGUF files hold A itself, an
    // f32 already rounded once, so from them the product takes a second rounding: a_base2 may
    // then differ from the A_log path's in the last bit.
    const bool stored_a = binder.has(mixer + "A");
    const float* a_source = binder.f32(mixer + (stored_a ? "A" : "A_log"), {D, N});
    std::vector<float> a_base2(N * D);
    for (int64_t c = 0; c < D; ++c) {
      for (int64_t n = 0; n < N; ++n) {
        const double value = a_source[c * N + n];
        const double a = stored_a ? value : -std::exp(value);
        a_base2[n * D + c] = static_cast<float>(a * std::numbers::log2e);
      }
    }
    layer.a_base2 = binder.keep(std::move(a_base2));
  }
}

std::span<const std::string_view> Mamba1Model::layer_phase_names() const {
  return kPhaseNames;
}

size_t Mamba1Model::scratch_floats_per_row() const {
  const ModelConfig& c = config_;
  // xn [d] | xz [2D] | u [D] | xdbl [R + 2N] | dt [D] | y [D]
  return c.d_model + 5 * c.d_inner + c.dt_rank + 2 * c.d_state;
}

void Mamba1Model::forward_layers(const ComputeContext& ctx, std::span<const Rows> rows, float* hidden,
                                 int64_t m, [[maybe_unused]] const ForwardOptions& options, Workspace& ws,
                                 float* scratch) const {
  // Mamba-1 has one scan form, so no option changes its layers.
  const ModelConfig& c = config_;
  const int64_t d = c.d_model, D = c.d_inner, N = c.d_state, R = c.dt_rank, K = c.d_conv;
  const int64_t xdbl_width = R + 2 * N;
  float* xn = scratch;                // [m, d]
  float* xz = xn + m * d;             // [m, 2D]
  float* u = xz + m * 2 * D;          // [m, D]
  float* xdbl = u + m * D;            // [m, R + 2N]
  float* dt = xdbl + m * xdbl_width;  // [m, D]
  float* y = dt + m * D;              // [m, D]

  Mamba1Scratch& args = ws.layer_scratch<Mamba1Scratch>();
  args.conv.resize(rows.size());
  args.scan.resize(rows.size());
  for (int64_t l = 0; l < c.n_layer; ++l) {
    const Mamba1Layer& layer = layers_[l];
    const int64_t conv_at = state_layout_.offset(l, kConvPart), ssm_at = state_layout_.offset(l, kSsmPart);

    {
      ScopedPhase timer(ctx.profile, kNorm);
      rms_norm(ctx, {hidden, d, m, d, layer.norm, c.norm_eps, xn, d});  // [m, d]
    }
    {
      ScopedPhase timer(ctx.profile, kInProj);
      matmul(ctx, {xn, d, m, layer.in_proj, layer.in_proj_bias, xz, 2 * D,
                   false});  // [m, d] x [2D, d]^T -> [m, 2D]
    }

    for (size_t s = 0; s < rows.size(); ++s) {
      float* history = rows[s].state->values.data() + conv_at;  // [K - 1, D]
      CausalConvArgs& conv = args.conv[s];
      conv = {xz + rows[s].begin * 2 * D,
              2 * D,
              rows[s].count,
              D,
              static_cast<int>(K),
              layer.conv_weight,
              layer.conv_bias,
              history,
              u + rows[s].begin * D,
              D};
    }
    {
      ScopedPhase timer(ctx.profile, kConv);
      causal_conv_silu(ctx, args.conv);  // x half of xz -> u [m, D]
    }
    {
      ScopedPhase timer(ctx.profile, kXProj);
      matmul(ctx, {u, D, m, layer.x_proj, nullptr, xdbl, xdbl_width, false});  // [m, D] -> [m, R + 2N]
    }
    if (c.mixer_rms_norm) {
      ScopedPhase timer(ctx.profile, kNorm);
      // FalconMamba normalizes dt_low, B and C each over its own width, in place, per row.
      const float eps = static_cast<float>(c.mixer_rms_eps);
      const std::pair<int64_t, int64_t> parts[] = {{0, R}, {R, N}, {R + N, N}};  // (offset, width)
      for (const auto& [offset, width] : parts)
        rms_norm(ctx,
                 {xdbl + offset, xdbl_width, m, width, mixer_norm_ones_, eps, xdbl + offset, xdbl_width});
    }
    {
      ScopedPhase timer(ctx.profile, kDtProj);
      matmul(ctx, {xdbl, xdbl_width, m, layer.dt_proj, layer.dt_bias, dt, D, false,
                   true});  // softplus, [m, R] -> [m, D]
    }

    for (size_t s = 0; s < rows.size(); ++s) {
      const int64_t begin = rows[s].begin;
      SelectiveScanArgs& scan = args.scan[s];
      scan.length = rows[s].count;
      scan.channels = D;
      scan.d_state = N;
      scan.u = u + begin * D;
      scan.ldu = D;
      scan.dt = dt + begin * D;
      scan.lddt = D;
      scan.b = xdbl + begin * xdbl_width + R;
      scan.c = scan.b + N;
      scan.ldbc = xdbl_width;
      scan.z = xz + begin * 2 * D + D;
      scan.ldz = 2 * D;
      scan.a_base2 = layer.a_base2;
      scan.d_skip = layer.d_skip;
      scan.state = rows[s].state->values.data() + ssm_at;  // [N, D]
      scan.y = y + begin * D;
      scan.ldy = D;
    }
    {
      ScopedPhase timer(ctx.profile, kScan);
      selective_scan(ctx, args.scan);  // -> gated y [m, D]
    }
    {
      ScopedPhase timer(ctx.profile, kOutProj);
      matmul(ctx, {y, D, m, layer.out_proj, layer.out_proj_bias, hidden, d,
                   true});  // residual += [m, D] -> [m, d]
    }
  }
}

}  // namespace mb

#include "model/mamba2.h"

#include <cmath>
#include <iterator>
#include <numbers>
#include <string>

#include "core/error.h"
#include "core/profile.h"
#include "io/safetensors.h"
#include "model/weight_binder.h"
#include "ops/gated_rms_norm.h"
#include "ops/rms_norm.h"

namespace mb {
namespace {

// The layer phases of a profile, ids from kFirstLayerPhase in the order of kPhaseNames.
enum Mamba2Phase : PhaseId { kNorm = kFirstLayerPhase, kInProj, kConv, kScan, kGateNorm, kOutProj };
constexpr std::string_view kPhaseNames[] = {"rmsnorm",  "in_proj gemm",  "conv+silu",
                                            "ssd scan", "gated rmsnorm", "out_proj gemm+residual"};
static_assert(std::size(kPhaseNames) == kOutProj - kFirstLayerPhase + 1);

// Per-sequence op arguments of a round, reused across calls.
struct Mamba2Scratch final : LayerScratch {
  std::vector<CausalConvArgs> conv;
  std::vector<Mamba2ScanSequence> scan;
};

}  // namespace

Mamba2Model::Mamba2Model(const ModelConfig& config, std::shared_ptr<const TensorSet> tensors,
                         const LoadOptions& options) {
  WeightBinder& binder = bind_common(config, std::move(tensors), options);

  const int64_t d = config.d_model, di = config.d_inner, N = config.d_state, P = config.headdim,
                H = config.n_heads(), K = config.d_conv, W = conv_width(), ip = in_proj_dim();

  layers_.resize(config.n_layer);
  for (int64_t l = 0; l < config.n_layer; ++l) {
    state_layout_.add_layer({{"conv", {K - 1, W}}, {"ssm", {H, N, P}}});  // kConvPart, kSsmPart
    const std::string p = "backbone.layers." + std::to_string(l) + ".";
    const std::string mixer = p + "mixer.";
    Mamba2Layer& layer = layers_[l];
    layer.norm = binder.f32(p + "norm.weight", {d});
    layer.in_proj = binder.matrix(mixer + "in_proj.weight", ip, d);
    layer.out_proj = binder.matrix(mixer + "out_proj.weight", d, di);
    if (config_.use_bias) {
      layer.in_proj_bias = binder.f32(mixer + "in_proj.bias", {ip});
      layer.out_proj_bias = binder.f32(mixer + "out_proj.bias", {d});
    }
    if (config_.use_conv_bias) layer.conv_bias = binder.f32(mixer + "conv1d.bias", {W});
    if (config_.gated_norm) layer.gate_norm = binder.f32(mixer + "norm.weight", {di});

    layer.conv_weight = binder.conv_taps(mixer + "conv1d.weight", W, K);

    Mamba2ScanParams& s = layer.scan;
    s.n_heads = H;
    s.headdim = P;
    s.d_state = N;
    s.n_groups = config.ngroups;
    s.dt_min = static_cast<float>(config.dt_limit_min);
    s.dt_max = static_cast<float>(config.dt_limit_max);
    s.chunk = config.chunk_size;
    s.dt_bias = binder.f32(mixer + "dt_bias", {H});
    // D is one value per head, or one per channel in checkpoints made with D_has_hdim.
    const StoredTensor* d_tensor = tensors_->find(mixer + "D");
    s.d_skip_per_channel = d_tensor != nullptr && d_tensor->shape == std::vector<int64_t>{di};
    s.d_skip = binder.f32(mixer + "D", {s.d_skip_per_channel ? di : H});
    // A = -exp(A_log), for the chunked form, and premultiplied by log2(e) (in double, one
    // rounding) for the sequential form's base-2 decay. GGUF files hold A itself, the same f32
    // as `a` here when written from A_log; the base-2 form then takes a second rounding and may
    // differ from the A_log path's in the last bit.
    const bool stored_a = binder.has(mixer + "A");
    const float* a_source = binder.f32(mixer + (stored_a ? "A" : "A_log"), {H});
    std::vector<float> a(H), a_base2(H);
    for (int64_t h = 0; h < H; ++h) {
      const double exact = stored_a ? a_source[h] : -std::exp(static_cast<double>(a_source[h]));
      a[h] = static_cast<float>(exact);
      a_base2[h] = static_cast<float>(exact * std::numbers::log2e);
    }
    s.a = binder.keep(std::move(a));
    s.a_base2 = binder.keep(std::move(a_base2));
  }
}

std::span<const std::string_view> Mamba2Model::layer_phase_names() const {
  return kPhaseNames;
}

size_t Mamba2Model::scratch_floats_per_row() const {
  // xn [d] | proj [in_proj_dim] | xbc [conv_width] | y [d_inner]
  return config_.d_model + in_proj_dim() + conv_width() + config_.d_inner;
}

void Mamba2Model::forward_layers(const ComputeContext& ctx, std::span<const Rows> rows, float* hidden,
                                 int64_t m, const ForwardOptions& options, Workspace& ws,
                                 float* scratch) const {
  const ModelConfig& c = config_;
  const int64_t d = c.d_model, di = c.d_inner, W = conv_width(), ip = in_proj_dim();
  const int64_t ssd_chunk = options.ssd_chunk > 0 ? options.ssd_chunk : c.chunk_size;
  // On CPUs the sequential recurrence is as fast as the chunked form or faster at every shape
  // measured (bench/mamba2_op_bench: d_state 16 to 128, chunks of 16 to 256, up to 1024
  // positions; BENCHMARKS.md), so Auto picks it: the chunked form only adds work here.
  const bool chunked = options.scan == ScanForm::Chunked;
  float* xn = scratch;         // [m, d]
  float* proj = xn + m * d;    // [m, in_proj_dim]: z | xBC | dt
  float* xbc = proj + m * ip;  // [m, conv_width] conv + SiLU outputs
  float* y = xbc + m * W;      // [m, d_inner]

  Mamba2Scratch& scratch_args = ws.layer_scratch<Mamba2Scratch>();
  std::vector<CausalConvArgs>& conv_args = scratch_args.conv;
  conv_args.resize(rows.size());
  std::vector<Mamba2ScanSequence>& args = scratch_args.scan;
  args.resize(rows.size());
  for (size_t s = 0; s < rows.size(); ++s) args[s].chunked = chunked;
  for (int64_t l = 0; l < c.n_layer; ++l) {
    const Mamba2Layer& layer = layers_[l];
    const int64_t conv_at = state_layout_.offset(l, kConvPart), ssm_at = state_layout_.offset(l, kSsmPart);
    {
      ScopedPhase timer(ctx.profile, kNorm);
      rms_norm(ctx, {hidden, d, m, d, layer.norm, c.norm_eps, xn, d});  // [m, d]
    }
    {
      ScopedPhase timer(ctx.profile, kInProj);
      matmul(ctx,
             {xn, d, m, layer.in_proj, layer.in_proj_bias, proj, ip, false});  // [m, d] -> [m, in_proj_dim]
    }
    for (size_t s = 0; s < rows.size(); ++s) {
      float* state = rows[s].state->values.data();
      conv_args[s] = {proj + rows[s].begin * ip + di,
                      ip,
                      rows[s].count,
                      W,
                      static_cast<int>(c.d_conv),
                      layer.conv_weight,
                      layer.conv_bias,
                      state + conv_at,  // [K - 1, W]
                      xbc + rows[s].begin * W,
                      W};
      Mamba2ScanSequence& a = args[s];
      a.length = rows[s].count;
      a.xbc = xbc + rows[s].begin * W;
      a.ldxbc = W;
      a.dt = proj + rows[s].begin * ip + di + W;
      a.lddt = ip;
      a.state = state + ssm_at;  // [H, N, P]
      a.y = y + rows[s].begin * di;
      a.ldy = di;
    }
    {
      ScopedPhase timer(ctx.profile, kConv);
      causal_conv_silu(ctx, conv_args);  // xBC of proj -> xbc [m, conv_width]
    }
    {
      ScopedPhase timer(ctx.profile, kScan);
      Mamba2ScanParams params = layer.scan;
      params.chunk = ssd_chunk;
      mamba2_scan(ctx, params, args);  // -> y [m, d_inner] before the gate
    }
    {
      ScopedPhase timer(ctx.profile, kGateNorm);
      GatedRmsNormArgs gate{y, di, proj, ip, m, di, di / c.ngroups, layer.gate_norm, c.norm_eps, y, di};
      gated_rms_norm(ctx, gate);  // y = norm(y * silu(z)) per group, in place
    }
    {
      ScopedPhase timer(ctx.profile, kOutProj);
      matmul(ctx, {y, di, m, layer.out_proj, layer.out_proj_bias, hidden, d,
                   true});  // residual += [m, di] -> [m, d]
    }
  }
}

}  // namespace mb

#include "model/mamba3.h"

#include <algorithm>
#include <iterator>
#include <string>

#include "core/error.h"
#include "core/profile.h"
#include "io/safetensors.h"
#include "model/weight_binder.h"
#include "ops/rms_norm.h"

namespace mb {
namespace {

// The layer phases of a profile, ids from kFirstLayerPhase in the order of kPhaseNames. The
// mixer is one op (BCNorm, RoPE, the trapezoidal scan, the gate), so it is one phase.
enum Mamba3Phase : PhaseId { kNorm = kFirstLayerPhase, kInProj, kMixer, kOutProj };
constexpr std::string_view kPhaseNames[] = {"rmsnorm", "in_proj gemm", Mamba3Model::kMixerPhaseName,
                                            "out_proj gemm+residual"};
static_assert(std::size(kPhaseNames) == kOutProj - kFirstLayerPhase + 1);

// Per-sequence scan arguments of a round, reused across calls.
struct Mamba3Scratch final : LayerScratch {
  std::vector<Mamba3ScanSequence> scan;
};

}  // namespace
int64_t mamba3_rope_angles(int64_t d_state, double rope_fraction) {
  return static_cast<int64_t>(static_cast<float>(d_state) * static_cast<float>(rope_fraction)) / 2;
}

bool Mamba3Model::auto_prefers_chunked(int64_t positions, int64_t ssd_chunk) {
  // Measured on one layer of the 130m-sized shape (24 heads of 64 channels, d_state 128; the
  // scan op alone, one thread, bench/mamba3_op_bench): with chunks of 16 to 64 positions the
  // chunked form is 10-25% faster from 32 positions on, about even at 16, and up to 3x slower
  // below that, where its per-chunk setup is not amortized. With chunks of 128 its in-chunk
  // work (quadratic in the chunk length) and working set make it slower at every length.
  return positions >= 32 && ssd_chunk <= 64;
}

Mamba3Model::Mamba3Model(const ModelConfig& config, std::shared_ptr<const TensorSet> tensors,
                         const LoadOptions& options) {
  WeightBinder& binder = bind_common(config, std::move(tensors), options);

  const int64_t d = config.d_model, di = config.d_inner, N = config.d_state, P = config.headdim;
  const int64_t H = config.n_heads(), G = config.ngroups;
  n_angles_ = mamba3_rope_angles(N, config.rope_fraction);
  layers_.resize(config.n_layer);
  for (int64_t l = 0; l < config.n_layer; ++l) {
    const std::string p = "backbone.layers." + std::to_string(l) + ".";
    const std::string mixer = p + "mixer.";
    Mamba3Layer& layer = layers_[l];
    Mamba3ScanParams& s = layer.scan;
    s.n_heads = H;
    s.headdim = P;
    s.d_state = N;
    s.n_groups = G;
    s.n_angles = n_angles_;
    s.a_floor = static_cast<float>(config.a_floor);
    s.eps = config.norm_eps;
    s.chunk = config.chunk_size;
    layer.norm = binder.f32(p + "norm.weight", {d});
    layer.in_proj = binder.matrix(mixer + "in_proj.weight", s.proj_width(), d);
    s.dt_bias = binder.f32(mixer + "dt_bias", {H});
    s.b_bias = binder.f32(mixer + "B_bias", {H, 1, N});
    s.c_bias = binder.f32(mixer + "C_bias", {H, 1, N});
    s.b_norm = binder.f32(mixer + "B_norm.weight", {N});
    s.c_norm = binder.f32(mixer + "C_norm.weight", {N});
    s.d_skip = binder.f32(mixer + "D", {H});
    if (config.is_outproj_norm) s.gate_norm = binder.f32(mixer + "norm.weight", {di});
    layer.out_proj = binder.matrix(mixer + "out_proj.weight", d, di);

    // The op owns the order of its state block; the layout names the same parts at the same
    // offsets, which the check below keeps true if either side changes.
    const Mamba3StateLayout block = mamba3_state_layout(s);
    state_layout_.add_layer(
        {{"ssm", {H, N, P}}, {"k", {H, N}}, {"v", {H, P}}, {"angles", {H, std::max<int64_t>(n_angles_, 1)}}});
    const LayerStateLayout& added = state_layout_.layer(l);
    const int64_t expected[] = {block.ssm, block.k, block.v, block.angle};
    for (size_t part = 0; part < std::size(expected); ++part)
      MB_CHECK(added.parts[part].offset - added.offset == expected[part]);
    MB_CHECK(added.floats == block.total);
  }
}

std::span<const std::string_view> Mamba3Model::layer_phase_names() const {
  return kPhaseNames;
}

void Mamba3Model::disable_boundary_fold_for_testing() {
  for (Mamba3Layer& layer : layers_) layer.scan.boundary_fold = false;
}

size_t Mamba3Model::scratch_floats_per_row() const {
  // xn [d] | proj [in_proj_dim] | y [d_inner]
  return config_.d_model + in_proj_dim() + config_.d_inner;
}

void Mamba3Model::forward_layers(const ComputeContext& ctx, std::span<const Rows> rows, float* hidden,
                                 int64_t m, const ForwardOptions& options, Workspace& ws,
                                 float* scratch) const {
  const ModelConfig& c = config_;
  const int64_t d = c.d_model, di = c.d_inner, ip = in_proj_dim();
  const int64_t ssd_chunk = options.ssd_chunk > 0 ? options.ssd_chunk : c.chunk_size;
  float* xn = scratch;       // [m, d]
  float* proj = xn + m * d;  // [m, in_proj_dim]
  float* y = proj + m * ip;  // [m, d_inner]

  std::vector<Mamba3ScanSequence>& args = ws.layer_scratch<Mamba3Scratch>().scan;
  args.resize(rows.size());
  for (size_t s = 0; s < rows.size(); ++s) {
    // The choice depends only on this sequence's own positions in the round, so a sequence
    // computes the same bits in any batch.
    switch (options.scan) {
      case ScanForm::Sequential:
        args[s].chunked = false;
        break;
      case ScanForm::Chunked:
        args[s].chunked = true;
        break;
      case ScanForm::Auto:
        args[s].chunked = auto_prefers_chunked(rows[s].count, ssd_chunk);
        break;
    }
  }
  for (int64_t l = 0; l < c.n_layer; ++l) {
    const Mamba3Layer& layer = layers_[l];
    const int64_t block_at = state_layout_.layer(l).offset;  // the scan takes the whole block
    {
      ScopedPhase timer(ctx.profile, kNorm);
      rms_norm(ctx, {hidden, d, m, d, layer.norm, c.norm_eps, xn, d});  // [m, d]
    }
    {
      ScopedPhase timer(ctx.profile, kInProj);
      matmul(ctx, {xn, d, m, layer.in_proj, nullptr, proj, ip, false});  // [m, d] -> [m, in_proj_dim]
    }
    for (size_t s = 0; s < rows.size(); ++s) {
      Mamba3ScanSequence& a = args[s];
      a.length = rows[s].count;
      a.proj = proj + rows[s].begin * ip;
      a.ldp = ip;
      a.state = rows[s].state->values.data() + block_at;
      a.y = y + rows[s].begin * di;
      a.ldy = di;
    }
    {
      ScopedPhase timer(ctx.profile, kMixer);
      Mamba3ScanParams params = layer.scan;
      params.chunk = ssd_chunk;
      mamba3_scan(ctx, params, args);  // -> gated y [m, d_inner]
    }
    {
      ScopedPhase timer(ctx.profile, kOutProj);
      matmul(ctx, {y, di, m, layer.out_proj, nullptr, hidden, d, true});  // residual += [m, di] -> [m, d]
    }
  }
}

}  // namespace mb

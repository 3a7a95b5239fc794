// SPDX-License-Identifier: MIT
#include "model/blocks/mamba3_block.h"

#include <algorithm>
#include <iterator>

#include "core/error.h"
#include "model/blocks/mamba_schema.h"
#include "model/weight_binder.h"

namespace mb {
namespace {

// The block's phases, local ids in the order of kPhaseNames. The mixer is one op (BCNorm, RoPE,
// the trapezoidal scan, the gate), so it is one phase.
enum Phase : int { kNormPhase, kInProjPhase, kMixerPhase, kOutProjPhase };
constexpr std::string_view kPhaseNames[] = {"rmsnorm", "in_proj gemm", Mamba3Block::kMixerPhaseName,
                                            "out_proj gemm+residual"};
static_assert(std::size(kPhaseNames) == kOutProjPhase + 1);

// Scratch buffers, in the order of scratch_widths().
enum Scratch : size_t { kXn, kProj, kY };

// A Mamba-3 tensor: no GGUF name.
TensorSpec own(TensorSpec spec) {
  spec.gguf.clear();
  spec.gguf_negexp_name.clear();
  return spec;
}

TensorSpec per_head_bias(const BlockSpec& block, const char* name, int64_t heads, int64_t d_state) {
  TensorSpec spec;
  spec.name = block.tensor(name);
  spec.shape = {heads, 1, d_state};
  spec.init = {TensorInit::Uniform, 0.1};
  spec.keep_f32 = true;
  return spec;
}

TensorSpec bc_norm(const BlockSpec& block, const char* name, int64_t d_state) {
  TensorSpec spec;
  spec.name = block.tensor(name);
  spec.shape = {d_state};
  return spec;
}

}  // namespace

int64_t mamba3_rope_angles(int64_t d_state, double rope_fraction) {
  return static_cast<int64_t>(static_cast<float>(d_state) * static_cast<float>(rope_fraction)) / 2;
}

std::vector<TensorSpec> Mamba3Block::schema(const ModelConfig& c, const BlockSpec& block) {
  namespace ms = mamba_schema;
  const int64_t d = c.d_model, di = c.ssm.d_inner, N = c.ssm.d_state, H = c.ssm.n_heads(), G = c.ssm.ngroups;
  const int64_t in_proj_rows = 2 * di + 2 * G * N + 3 * H + mamba3_rope_angles(N, c.ssm.rope_fraction);
  // Unit-variance outputs for unit-variance inputs: z and x are O(1), dd_dt moves softplus around
  // the dt_bias, dd_A gives A of order -1, and the trapezoid mix and the angle velocities cover
  // their ranges; B/C biases are small and the norms start at one.
  return {
      own(ms::norm(block, d)),
      own(ms::in_proj(block, in_proj_rows, d)),
      own(ms::dt_bias(block, H)),
      per_head_bias(block, "B_bias", H, N),
      per_head_bias(block, "C_bias", H, N),
      bc_norm(block, "B_norm.weight", N),
      bc_norm(block, "C_norm.weight", N),
      own(ms::d_skip(block, {H}, GgufForm::Same)),
      own(ms::gate_norm(block, di, {TensorInit::Constant, 1.0}, c.ssm.is_outproj_norm)),
      own(ms::out_proj(block, d, di, c.n_layer)),
  };
}

Mamba3Block::Mamba3Block(const ModelConfig& c, const BlockSpec& spec, WeightBinder& binder)
    : Block(BlockKind::Mamba3Mixer, spec), d_model_(c.d_model), norm_eps_(c.norm_eps) {
  weights_ = bind_weights(binder, schema(c, spec));
  Mamba3ScanParams& p = params_;
  p.n_heads = c.ssm.n_heads();
  p.headdim = c.ssm.headdim;
  p.d_state = c.ssm.d_state;
  p.n_groups = c.ssm.ngroups;
  p.n_angles = mamba3_rope_angles(c.ssm.d_state, c.ssm.rope_fraction);
  p.a_floor = static_cast<float>(c.ssm.a_floor);
  p.eps = c.norm_eps;
  p.chunk = c.ssm.chunk_size;
  p.dt_bias = weight(kDtBias).host_values;
  p.b_bias = weight(kBBias).host_values;
  p.c_bias = weight(kCBias).host_values;
  p.b_norm = weight(kBNorm).host_values;
  p.c_norm = weight(kCNorm).host_values;
  p.d_skip = weight(kD).host_values;
  p.gate_norm = weight(kGateNorm).host_values;
  MB_CHECK(weight(kInProj).host_matrix.rows == p.proj_width());
}

std::vector<StatePart> Mamba3Block::state_parts() const {
  const Mamba3ScanParams& p = params_;
  const int64_t H = p.n_heads, N = p.d_state, P = p.headdim;
  // The op owns the order of its state block; these parts name the same offsets, which the check
  // keeps true if either side changes.
  const std::vector<StatePart> parts = {
      {"ssm", {H, N, P}}, {"k", {H, N}}, {"v", {H, P}}, {"angles", {H, std::max<int64_t>(p.n_angles, 1)}}};
  const Mamba3StateLayout block = mamba3_state_layout(p);
  int64_t offset = 0;
  const int64_t expected[] = {block.ssm, block.k, block.v, block.angle};
  for (size_t part = 0; part < parts.size(); ++part) {
    MB_CHECK(offset == expected[part]);
    offset += parts[part].floats();
  }
  MB_CHECK(offset == block.total);
  return parts;
}

std::vector<int64_t> Mamba3Block::scratch_widths() const {
  // xn [d] | proj [in_proj width] | y [d_inner]
  return {d_model_, params_.proj_width(), params_.d_inner()};
}

std::span<const std::string_view> Mamba3Block::phase_names() const {
  return kPhaseNames;
}

std::vector<OpQuery> Mamba3Block::ops() const {
  return {{OpKind::Matmul, weight(kInProj).host_matrix.dtype},
          {OpKind::Matmul, weight(kOutProj).host_matrix.dtype},
          {OpKind::Mamba3Scan, DType::F32, params_.d_state}};
}

void Mamba3Block::forward(LayerContext& ctx) const {
  const Backend& be = ctx.backend;
  Stream& s = ctx.stream;
  const int64_t m = ctx.m;
  const View xn = ctx.scratch[kXn], proj = ctx.scratch[kProj], y = ctx.scratch[kY];
  const Mamba3ScanParams& p = params_;

  const MatmulOp in_proj{.x = ctx.hidden,
                         .m = m,
                         .w = matrix(kInProj),
                         .y = proj,
                         .norm = {values(kNorm), norm_eps_, xn, phase(kNormPhase)},
                         .phase = phase(kInProjPhase)};
  be.matmul(s, in_proj);  // rms_norm([m, d]) -> proj [m, in_proj width]

  Mamba3ScanOp scan;
  scan.n_heads = p.n_heads;
  scan.headdim = p.headdim;
  scan.d_state = p.d_state;
  scan.n_groups = p.n_groups;
  scan.n_angles = p.n_angles;
  scan.dt_bias = values(kDtBias);
  scan.b_bias = values(kBBias);
  scan.c_bias = values(kCBias);
  scan.b_norm = values(kBNorm);
  scan.c_norm = values(kCNorm);
  scan.d_skip = values(kD);
  scan.gate_norm = values(kGateNorm);
  scan.a_floor = p.a_floor;
  scan.eps = p.eps;
  scan.form = ctx.scan;
  scan.chunk = ctx.ssd_chunk > 0 ? ctx.ssd_chunk : p.chunk;
  scan.boundary_fold = p.boundary_fold;
  scan.proj = proj;
  scan.y = y;
  scan.state_offset = state_offset();  // the layer's whole block
  scan.parts = ctx.parts;
  scan.phase = phase(kMixerPhase);
  be.mamba3_scan(s, scan);  // -> gated y [m, d_inner]

  be.matmul(
      s, {y, m, matrix(kOutProj), {}, ctx.hidden, true, false, {}, phase(kOutProjPhase)});  // residual += [m,
                                                                                            // di] -> [m, d]
}

}  // namespace mb

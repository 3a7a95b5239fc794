// SPDX-License-Identifier: MIT
#include "model/blocks/gated_attention_block.h"

#include <cmath>
#include <iterator>

#include "model/weight_binder.h"

namespace mb {
namespace {

enum Phase : int {
  kNormPhase,
  kQkvPhase,
  kQkNormPhase,
  kRopePhase,
  kAppendPhase,
  kAttentionPhase,
  kGatePhase,
  kOutPhase
};
constexpr std::string_view kPhaseNames[] = {"rmsnorm",   "qkv gemm",  "qk norm",     "rope",
                                            "kv append", "attention", "output gate", "o_proj gemm+residual"};
static_assert(std::size(kPhaseNames) == kOutPhase + 1);

// Scratch buffers, in the order of scratch_widths(): xn [d] | qgo [3 W]: q | gate | attention
// output (gate | output side by side, as glu reads them) | k | v.
enum Scratch : size_t { kXn, kQgo, kKRows, kVRows };
enum KvPart : size_t { kKeys, kValues };

TensorSpec gated_matrix(const BlockSpec& block, const std::string& name, std::vector<int64_t> shape,
                        double bound, const std::string& gguf) {
  return {.name = block.tensor(name),
          .shape = std::move(shape),
          .role = TensorRole::Matrix,
          .init = {TensorInit::Uniform, bound},
          .gguf = block.gguf(gguf)};
}

}  // namespace

std::vector<TensorSpec> GatedAttentionBlock::schema(const ModelConfig& c, const BlockSpec& block) {
  const AttentionConfig& a = c.hybrid.attention;
  const int64_t d = c.d_model, qw = a.n_heads * a.head_dim, kvw = a.n_kv_heads * a.head_dim, hd = a.head_dim;
  const double in_bound = std::sqrt(3.0 / static_cast<double>(d));
  const double out_bound =
      std::sqrt(3.0 / static_cast<double>(qw)) / std::sqrt(static_cast<double>(c.n_layer));
  TensorSpec norm{.name = block.norm(),
                  .shape = {d},
                  .init = {TensorInit::Uniform, 0.2},
                  .gguf = block.gguf(block.names.gguf_norm)};
  norm.zero_centred = true;
  // NeoX RoPE: llama.cpp's converter keeps q and k as they are (no head-pair reordering).
  TensorSpec q_norm{.name = block.tensor("q_norm.weight"),
                    .shape = {hd},
                    .init = {TensorInit::Uniform, 0.2},
                    .gguf = block.gguf("attn_q_norm.weight")};
  q_norm.zero_centred = true;
  TensorSpec k_norm = q_norm;
  k_norm.name = block.tensor("k_norm.weight");
  k_norm.gguf = block.gguf("attn_k_norm.weight");
  return {norm,
          gated_matrix(block, "q_proj.weight", {2 * qw, d}, in_bound, "attn_q.weight"),
          gated_matrix(block, "k_proj.weight", {kvw, d}, in_bound, "attn_k.weight"),
          gated_matrix(block, "v_proj.weight", {kvw, d}, in_bound, "attn_v.weight"),
          gated_matrix(block, "o_proj.weight", {d, qw}, out_bound, "attn_output.weight"),
          q_norm,
          k_norm};
}

GatedAttentionBlock::GatedAttentionBlock(const ModelConfig& c, const BlockSpec& spec, WeightBinder& binder)
    : Block(BlockKind::GatedAttention, spec),
      d_model_(c.d_model),
      n_heads_(c.hybrid.attention.n_heads),
      n_kv_heads_(c.hybrid.attention.n_kv_heads),
      head_dim_(c.hybrid.attention.head_dim),
      rotary_dims_(static_cast<int64_t>(static_cast<double>(c.hybrid.attention.head_dim) *
                                        c.hybrid.attention.partial_rotary_factor)),
      scale_(static_cast<float>(c.hybrid.attention.scale)),
      rope_theta_(c.hybrid.attention.rope_theta),
      norm_eps_(c.norm_eps) {
  std::vector<TensorSpec> specs = schema(c, spec);
  // q_proj's rows are per head [query | gate]: bound as every head's query, then every head's
  // gate, so the queries are one contiguous run of heads for the norm, RoPE and attention.
  const int64_t hd = head_dim_, qw = n_heads_ * hd;
  std::vector<int64_t> order(static_cast<size_t>(2 * qw));
  for (int64_t h = 0; h < n_heads_; ++h)
    for (int64_t i = 0; i < hd; ++i) {
      order[static_cast<size_t>(h * hd + i)] = h * 2 * hd + i;
      order[static_cast<size_t>(qw + h * hd + i)] = h * 2 * hd + hd + i;
    }
  specs[kQ].wanted = false;
  weights_ = bind_weights(binder, specs);
  weights_[kQ].host_matrix = binder.matrix_in_row_order(specs[kQ].name, 2 * qw, d_model_, order);
}

std::vector<StatePart> GatedAttentionBlock::state_parts() const {
  return {{"k", {n_kv_heads_, head_dim_}, true}, {"v", {n_kv_heads_, head_dim_}, true}};
}

std::vector<int64_t> GatedAttentionBlock::scratch_widths() const {
  const int64_t qw = n_heads_ * head_dim_, kvw = n_kv_heads_ * head_dim_;
  return {d_model_, 3 * qw, kvw, kvw};
}

std::span<const std::string_view> GatedAttentionBlock::phase_names() const {
  return kPhaseNames;
}

std::vector<OpQuery> GatedAttentionBlock::ops() const {
  return {{OpKind::RmsNorm},
          {OpKind::Matmul, weight(kQ).host_matrix.dtype},
          {OpKind::Matmul, weight(kK).host_matrix.dtype},
          {OpKind::Matmul, weight(kV).host_matrix.dtype},
          {OpKind::Matmul, weight(kO).host_matrix.dtype},
          {OpKind::Rope},
          {OpKind::AppendRows},
          {OpKind::Attention, DType::F32, head_dim_},
          {OpKind::Glu}};
}

void GatedAttentionBlock::norm_heads(const LayerContext& ctx, View x, int64_t heads, View weight) const {
  for (int64_t h0 = 0; h0 < heads; h0 += kMaxNormSegments) {
    NormSegment segments[kMaxNormSegments];
    int n = 0;
    for (int64_t h = h0; h < heads && n < kMaxNormSegments; ++h)
      segments[n++] = {h * head_dim_, head_dim_, weight};
    ctx.backend.rms_norm(ctx.stream, {x, ctx.m, std::span(segments, n), norm_eps_, x, phase(kQkNormPhase)});
  }
}

void GatedAttentionBlock::forward(LayerContext& ctx) const {
  const Backend& be = ctx.backend;
  Stream& s = ctx.stream;
  const int64_t m = ctx.m, hd = head_dim_, qw = n_heads_ * hd, kvw = n_kv_heads_ * hd;
  const View xn = ctx.scratch[kXn], q = ctx.scratch[kQgo], k = ctx.scratch[kKRows], v = ctx.scratch[kVRows];
  const View gate = q.column(qw), o = q.column(2 * qw);
  const NormSegment norm{0, d_model_, values(kNorm)};
  be.rms_norm(s, {ctx.hidden, m, std::span(&norm, 1), norm_eps_, xn, phase(kNormPhase)});  // [m, d]
  be.matmul(s, {xn, m, matrix(kQ), {}, q, false, false, {}, phase(kQkvPhase)});  // [m, 2 W]: q | gate
  be.matmul(s, {xn, m, matrix(kK), {}, k, false, false, {}, phase(kQkvPhase)});  // [m, Hkv hd]
  be.matmul(s, {xn, m, matrix(kV), {}, v, false, false, {}, phase(kQkvPhase)});
  // Per-head norms before RoPE, then RoPE on the first rotary_dims channels of each head.
  norm_heads(ctx, q, n_heads_, values(kQNorm));
  norm_heads(ctx, k, n_kv_heads_, values(kKNorm));
  be.rope(s, {hd, rope_theta_, q, n_heads_, k, n_kv_heads_, ctx.parts, phase(kRopePhase), rotary_dims_});
  const std::vector<StatePart>& parts = state_layout().parts;
  be.append_rows(s, {k, kvw, parts[kKeys].offset, ctx.parts, phase(kAppendPhase)});
  be.append_rows(s, {v, kvw, parts[kValues].offset, ctx.parts, phase(kAppendPhase)});
  be.attention(s, {n_heads_, n_kv_heads_, hd, scale_, q, parts[kKeys].offset, parts[kValues].offset, o,
                   ctx.parts, phase(kAttentionPhase)});  // -> o [m, W]
  // o * sigmoid(gate), written over the queries (no longer read).
  be.glu(s, {gate, m, qw, Activation::SigmoidGlu, q, phase(kGatePhase)});
  add_to_residual(ctx, q, matrix(kO), {}, 1.0f, {}, phase(kOutPhase));
}

}  // namespace mb

// SPDX-License-Identifier: MIT
#include "model/blocks/attention_block.h"

#include <cmath>
#include <iterator>

#include "model/weight_binder.h"

namespace mb {
namespace {

enum Phase : int { kNormPhase, kQkvPhase, kRopePhase, kAppendPhase, kAttentionPhase, kOutPhase };
constexpr std::string_view kPhaseNames[] = {"rmsnorm",   "qkv gemm",  "rope",
                                            "kv append", "attention", "o_proj gemm+residual"};
static_assert(std::size(kPhaseNames) == kOutPhase + 1);

// Scratch buffers, in the order of scratch_widths().
enum Scratch : size_t { kXn, kQRows, kKRows, kVRows, kY, kOut };

// The growing parts, in the order of state_parts().
enum KvPart : size_t { kKeys, kValues };

TensorSpec projection(const BlockSpec& block, const char* name, int64_t rows, int64_t cols, double bound,
                      const char* gguf) {
  TensorSpec s;
  s.name = block.tensor(std::string(name) + ".weight");
  s.shape = {rows, cols};
  s.role = TensorRole::Matrix;
  s.init = {TensorInit::Uniform, bound};
  s.gguf = block.gguf(std::string(gguf) + ".weight");
  return s;
}

TensorSpec bias(const BlockSpec& block, const char* name, int64_t rows, bool wanted, const char* gguf) {
  TensorSpec s;
  s.name = block.tensor(std::string(name) + ".bias");
  s.shape = {rows};
  s.init = {TensorInit::Uniform, 0.1};
  s.wanted = wanted;
  s.gguf = block.gguf(std::string(gguf) + ".bias");
  return s;
}

}  // namespace

std::vector<TensorSpec> AttentionBlock::schema(const ModelConfig& c, const BlockSpec& block) {
  const AttentionConfig& a = c.hybrid.attention;
  const int64_t d = c.d_model, qw = a.n_heads * a.head_dim, kvw = a.n_kv_heads * a.head_dim;
  const bool b = a.bias;
  // Unit-variance products for unit-variance inputs; o_proj, a residual branch, is scaled down
  // by sqrt(n_layer) as out_proj is (mamba_schema.h).
  const double in_bound = std::sqrt(3.0 / static_cast<double>(d));
  const double out_bound =
      std::sqrt(3.0 / static_cast<double>(qw)) / std::sqrt(static_cast<double>(c.n_layer));
  TensorSpec norm{.name = block.norm(), .shape = {d}, .gguf = block.gguf(block.names.gguf_norm)};
  // llama.cpp's converter reorders the rows of each q and k head as for RoPE (GgufForm), except
  // Jamba's (JambaModel has no permutation: it has no RoPE).
  const bool permuted = c.family != ModelFamily::Jamba;
  const auto interleaved = [permuted](TensorSpec s) {
    if (permuted) s.gguf_form = GgufForm::HeadPairsInterleaved;
    return s;
  };
  return {norm,
          interleaved(projection(block, "q_proj", qw, d, in_bound, "attn_q")),
          interleaved(bias(block, "q_proj", qw, b, "attn_q")),
          interleaved(projection(block, "k_proj", kvw, d, in_bound, "attn_k")),
          interleaved(bias(block, "k_proj", kvw, b, "attn_k")),
          projection(block, "v_proj", kvw, d, in_bound, "attn_v"),
          bias(block, "v_proj", kvw, b, "attn_v"),
          projection(block, "o_proj", d, qw, out_bound, "attn_output"),
          bias(block, "o_proj", d, b, "attn_output")};
}

AttentionBlock::AttentionBlock(const ModelConfig& c, const BlockSpec& spec, WeightBinder& binder)
    : Block(BlockKind::Attention, spec),
      d_model_(c.d_model),
      n_heads_(c.hybrid.attention.n_heads),
      n_kv_heads_(c.hybrid.attention.n_kv_heads),
      head_dim_(c.hybrid.attention.head_dim),
      scale_(static_cast<float>(c.hybrid.attention.scale)),
      rope_theta_(c.hybrid.attention.rope_theta),
      rotary_dims_(c.hybrid.attention.rotary_dims()),
      norm_eps_(c.norm_eps),
      residual_multiplier_(static_cast<float>(c.hybrid.residual_multiplier)) {
  weights_ = bind_weights(binder, schema(c, spec));
}

std::vector<StatePart> AttentionBlock::state_parts() const {
  return {{"k", {n_kv_heads_, head_dim_}, true}, {"v", {n_kv_heads_, head_dim_}, true}};
}

std::vector<int64_t> AttentionBlock::scratch_widths() const {
  const int64_t qw = n_heads_ * head_dim_, kvw = n_kv_heads_ * head_dim_;
  std::vector<int64_t> widths = {d_model_, qw, kvw, kvw, qw};
  if (residual_multiplier_ != 1.0f) widths.push_back(d_model_);
  return widths;
}

std::span<const std::string_view> AttentionBlock::phase_names() const {
  return kPhaseNames;
}

std::vector<OpQuery> AttentionBlock::ops() const {
  std::vector<OpQuery> ops = {{OpKind::RmsNorm},
                              {OpKind::Matmul, weight(kQ).host_matrix.dtype},
                              {OpKind::Matmul, weight(kO).host_matrix.dtype},
                              {OpKind::AppendRows},
                              {OpKind::Attention, DType::F32, head_dim_}};
  if (residual_multiplier_ != 1.0f) ops.push_back({OpKind::Scale});
  if (rope_theta_ > 0.0) ops.push_back({OpKind::Rope});
  return ops;
}

void AttentionBlock::forward(LayerContext& ctx) const {
  const Backend& be = ctx.backend;
  Stream& s = ctx.stream;
  const int64_t m = ctx.m, kvw = n_kv_heads_ * head_dim_;
  const View xn = ctx.scratch[kXn], q = ctx.scratch[kQRows], k = ctx.scratch[kKRows], v = ctx.scratch[kVRows],
             y = ctx.scratch[kY];
  const NormSegment norm{0, d_model_, values(kNorm)};
  be.rms_norm(s, {ctx.hidden, m, std::span(&norm, 1), norm_eps_, xn, phase(kNormPhase)});    // [m, d]
  be.matmul(s, {xn, m, matrix(kQ), values(kQBias), q, false, false, {}, phase(kQkvPhase)});  // [m, H hd]
  be.matmul(s, {xn, m, matrix(kK), values(kKBias), k, false, false, {}, phase(kQkvPhase)});  // [m, Hkv hd]
  be.matmul(s, {xn, m, matrix(kV), values(kVBias), v, false, false, {}, phase(kQkvPhase)});
  // RoPE rotates each row's queries and keys by its absolute position: a key once, before it
  // enters the cache, a query before it attends.
  if (rope_theta_ > 0.0)
    be.rope(
        s, {head_dim_, rope_theta_, q, n_heads_, k, n_kv_heads_, ctx.parts, phase(kRopePhase), rotary_dims_});
  // Every position of the round is in the cache before any of them attends.
  const std::vector<StatePart>& parts = state_layout().parts;
  be.append_rows(s, {k, kvw, parts[kKeys].offset, ctx.parts, phase(kAppendPhase)});
  be.append_rows(s, {v, kvw, parts[kValues].offset, ctx.parts, phase(kAppendPhase)});
  be.attention(s, {n_heads_, n_kv_heads_, head_dim_, scale_, q, parts[kKeys].offset, parts[kValues].offset, y,
                   ctx.parts, phase(kAttentionPhase)});  // -> y [m, H hd]
  const View out = residual_multiplier_ != 1.0f ? ctx.scratch[kOut] : View{};
  add_to_residual(ctx, y, matrix(kO), values(kOBias), residual_multiplier_, out, phase(kOutPhase));
}

}  // namespace mb

// SPDX-License-Identifier: MIT
#include "model/blocks/zamba2_block.h"

#include <cmath>
#include <iterator>
#include <string>

#include "model/weight_binder.h"

namespace mb {
namespace {

enum Phase : int {
  kNormPhase,
  kQkvPhase,
  kRopePhase,
  kAppendPhase,
  kAttentionPhase,
  kOutPhase,
  kMlpPhase,
  kLinearPhase
};
constexpr std::string_view kPhaseNames[] = {"concat+rmsnorm", "qkv gemm+lora", "rope",     "kv append",
                                            "attention",      "o_proj gemm",   "mlp+lora", "linear gemm"};
static_assert(std::size(kPhaseNames) == kLinearPhase + 1);

// Scratch buffers, in the order of scratch_widths(). The mixer's input comes last, at an index
// past the Mamba-2 mixer's own scratch (four or five buffers), which reads it after this block.
enum Scratch : size_t { kCat, kU, kQRows, kKRows, kVRows, kLora, kY, kA, kMixerIn };

// The growing parts, in the order of state_parts().
enum KvPart : size_t { kKeys, kValues };

std::string layer_name(int64_t layer, const std::string& rest) {
  return "model.layers." + std::to_string(layer) + "." + rest;
}

TensorSpec matrix_spec(std::string name, int64_t rows, int64_t cols, double bound, std::string gguf) {
  return {.name = std::move(name),
          .shape = {rows, cols},
          .role = TensorRole::Matrix,
          .init = {TensorInit::Uniform, bound},
          .gguf = std::move(gguf)};
}

// Drawn around 1, so a norm applied with the wrong weights shows in the outputs.
TensorSpec norm_spec(std::string name, int64_t width, std::string gguf) {
  return {.name = std::move(name),
          .shape = {width},
          .init = {TensorInit::AroundOne, 0.5},
          .gguf = std::move(gguf)};
}

double bound_for(int64_t cols) {
  return std::sqrt(3.0 / static_cast<double>(cols));
}

}  // namespace

std::vector<TensorSpec> Zamba2SharedBlock::all_tensors(const ModelConfig& c, const BlockSpec& block) {
  const Zamba2Config& z = c.zamba2;
  const int64_t d = c.d_model, w = 2 * d, qw = z.n_heads * z.head_dim, kvw = z.n_kv_heads * z.head_dim,
                i = z.mlp_width, r = z.adapter_rank;
  const int64_t j = z.hybrid_index(block.layer), owner = z.hybrid_layers[j % z.mem_blocks];
  const std::string shared = layer_name(owner, "shared_transformer."), attn = shared + "self_attn.",
                    ffn = shared + "feed_forward.", own = std::to_string(j);
  // Our own GGUF layout (llama.cpp has no Zamba2): the shared block under its first use's layer,
  // a use's adapters and linear under its own layer.
  const std::string gs = gguf_layer_prefix(owner) + "shared_", gu = gguf_layer_prefix(block.layer);
  // The branch into the mixer's input is scaled down by sqrt(n_layer), as a residual branch is.
  const double out_bound = bound_for(d) / std::sqrt(static_cast<double>(c.n_layer));
  std::vector<TensorSpec> specs = {
      norm_spec(shared + "input_layernorm.weight", w, gs + "attn_norm.weight"),
      matrix_spec(attn + "q_proj.weight", qw, w, bound_for(w), gs + "attn_q.weight"),
      matrix_spec(attn + "k_proj.weight", kvw, w, bound_for(w), gs + "attn_k.weight"),
      matrix_spec(attn + "v_proj.weight", kvw, w, bound_for(w), gs + "attn_v.weight"),
      matrix_spec(attn + "o_proj.weight", d, qw, bound_for(qw), gs + "attn_output.weight"),
      norm_spec(shared + "pre_ff_layernorm.weight", d, gs + "ffn_norm.weight"),
      matrix_spec(ffn + "gate_up_proj.weight", 2 * i, d, bound_for(d), gs + "ffn_gate_up.weight"),
      matrix_spec(ffn + "down_proj.weight", d, i, bound_for(i), gs + "ffn_down.weight"),
  };
  // LoRA adapters: a down product of rank r, then an up product drawn small (a correction).
  const auto adapter = [&](const std::string& list, int64_t in, int64_t out, const std::string& gguf,
                           bool wanted) {
    TensorSpec a =
        matrix_spec(list + "." + own + ".0.weight", r, in, bound_for(in), gu + gguf + "_lora_a.weight");
    TensorSpec b =
        matrix_spec(list + "." + own + ".1.weight", out, r, 0.3 * bound_for(r), gu + gguf + "_lora_b.weight");
    a.wanted = b.wanted = wanted;
    specs.push_back(a);
    specs.push_back(b);
  };
  adapter(attn + "linear_q_adapter_list", w, qw, "attn_q", z.attention_adapter);
  adapter(attn + "linear_k_adapter_list", w, kvw, "attn_k", z.attention_adapter);
  adapter(attn + "linear_v_adapter_list", w, kvw, "attn_v", z.attention_adapter);
  adapter(ffn + "gate_up_proj_adapter_list", d, 2 * i, "ffn_gate_up", true);
  specs.push_back(
      matrix_spec(layer_name(block.layer, "linear.weight"), d, d, out_bound, gu + "hybrid_linear.weight"));
  return specs;
}

std::vector<TensorSpec> Zamba2SharedBlock::schema(const ModelConfig& c, const BlockSpec& block) {
  std::vector<TensorSpec> specs = all_tensors(c, block);
  const Zamba2Config& z = c.zamba2;
  if (z.hybrid_index(block.layer) >= z.mem_blocks) specs.erase(specs.begin(), specs.begin() + kShared);
  return specs;
}

Zamba2SharedBlock::Zamba2SharedBlock(const ModelConfig& c, const BlockSpec& spec, WeightBinder& binder)
    : Block(BlockKind::Zamba2Shared, spec),
      d_model_(c.d_model),
      n_heads_(c.zamba2.n_heads),
      n_kv_heads_(c.zamba2.n_kv_heads),
      head_dim_(c.zamba2.head_dim),
      mlp_width_(c.zamba2.mlp_width),
      rank_(c.zamba2.adapter_rank),
      attention_adapter_(c.zamba2.attention_adapter),
      scale_(static_cast<float>(1.0 / std::sqrt(static_cast<double>(c.zamba2.head_dim) / 2.0))),
      norm_eps_(c.norm_eps),
      rope_theta_(0.0) {
  const Zamba2Config& z = c.zamba2;
  if (z.mem_rope) {
    // HF's Zamba2RotaryEmbedding: with use_long_context the base becomes
    // theta * 8^(head_dim / (head_dim - 2)).
    const double hd = static_cast<double>(head_dim_);
    rope_theta_ = z.long_context ? z.rope_theta * std::pow(8.0, hd / (hd - 2.0)) : z.rope_theta;
  }
  weights_ = bind_weights(binder, all_tensors(c, spec));
}

std::vector<StatePart> Zamba2SharedBlock::state_parts() const {
  return {{"k", {n_kv_heads_, head_dim_}, true}, {"v", {n_kv_heads_, head_dim_}, true}};
}

std::vector<int64_t> Zamba2SharedBlock::scratch_widths() const {
  const int64_t w = 2 * d_model_, qw = n_heads_ * head_dim_, kvw = n_kv_heads_ * head_dim_;
  // cat | u (the normalized concat, then the normalized MLP input) | q | k | v | lora | y (the
  // attention's output, then gate | up) | a (o_proj's output, then down_proj's) | mixer input
  return {w, w, qw, kvw, kvw, rank_, std::max(qw, 2 * mlp_width_), d_model_, d_model_};
}

std::span<const std::string_view> Zamba2SharedBlock::phase_names() const {
  return kPhaseNames;
}

std::vector<OpQuery> Zamba2SharedBlock::ops() const {
  std::vector<OpQuery> ops = {{OpKind::Scale},
                              {OpKind::RmsNorm},
                              {OpKind::Matmul, weight(kQ).host_matrix.dtype},
                              {OpKind::Matmul, weight(kGateUp).host_matrix.dtype},
                              {OpKind::Matmul, weight(kMlpA).host_matrix.dtype},
                              {OpKind::Matmul, weight(kLinear).host_matrix.dtype},
                              {OpKind::AppendRows},
                              {OpKind::Attention, DType::F32, head_dim_},
                              {OpKind::Glu}};
  if (rope_theta_ > 0.0) ops.push_back({OpKind::Rope});
  return ops;
}

void Zamba2SharedBlock::project(const LayerContext& ctx, View u, size_t w, size_t a, View out) const {
  const Backend& be = ctx.backend;
  be.matmul(ctx.stream, {u, ctx.m, matrix(w), {}, out, false, false, {}, phase(kQkvPhase)});
  if (!weight(a)) return;
  // HF adds the adapter's output to the product's: the same sum, as f32 addition commutes.
  const View lora = ctx.scratch[kLora];
  be.matmul(ctx.stream, {u, ctx.m, matrix(a), {}, lora, false, false, {}, phase(kQkvPhase)});  // [m, r]
  be.matmul(ctx.stream, {lora, ctx.m, matrix(a + 1), {}, out, true, false, {}, phase(kQkvPhase)});
}

void Zamba2SharedBlock::forward(LayerContext& ctx) const {
  const Backend& be = ctx.backend;
  Stream& s = ctx.stream;
  const int64_t m = ctx.m, d = d_model_, kvw = n_kv_heads_ * head_dim_;
  const View cat = ctx.scratch[kCat], u = ctx.scratch[kU], q = ctx.scratch[kQRows], k = ctx.scratch[kKRows],
             v = ctx.scratch[kVRows], y = ctx.scratch[kY], a = ctx.scratch[kA],
             mixer_in = ctx.scratch[kMixerIn];

  // concat(hidden, embedding) by exact copies (x * 1), then one RMSNorm over its 2 d columns.
  be.scale(s, {ctx.hidden, m, d, 1.0f, false, cat, phase(kNormPhase)});
  be.scale(s, {ctx.embedding, m, d, 1.0f, false, cat.column(d), phase(kNormPhase)});
  const NormSegment in_norm{0, 2 * d, values(kInNorm)};
  be.rms_norm(s, {cat, m, std::span(&in_norm, 1), norm_eps_, u, phase(kNormPhase)});  // [m, 2d]

  project(ctx, u, kQ, kQA, q);  // [m, H hd]
  project(ctx, u, kK, kKA, k);  // [m, Hkv hd]
  project(ctx, u, kV, kVA, v);
  if (rope_theta_ > 0.0)
    be.rope(s, {head_dim_, rope_theta_, q, n_heads_, k, n_kv_heads_, ctx.parts, phase(kRopePhase)});
  const std::vector<StatePart>& parts = state_layout().parts;
  be.append_rows(s, {k, kvw, parts[kKeys].offset, ctx.parts, phase(kAppendPhase)});
  be.append_rows(s, {v, kvw, parts[kValues].offset, ctx.parts, phase(kAppendPhase)});
  be.attention(s, {n_heads_, n_kv_heads_, head_dim_, scale_, q, parts[kKeys].offset, parts[kValues].offset, y,
                   ctx.parts, phase(kAttentionPhase)});                         // -> y [m, H hd]
  be.matmul(s, {y, m, matrix(kO), {}, a, false, false, {}, phase(kOutPhase)});  // [m, d], no residual

  // The GeGLU MLP, its adapter reading the same normalized rows as gate_up.
  const NormSegment ff_norm{0, d, values(kFfNorm)};
  be.rms_norm(s, {a, m, std::span(&ff_norm, 1), norm_eps_, u, phase(kMlpPhase)});    // [m, d]
  be.matmul(s, {u, m, matrix(kGateUp), {}, y, false, false, {}, phase(kMlpPhase)});  // [m, 2 I]
  be.matmul(s, {u, m, matrix(kMlpA), {}, ctx.scratch[kLora], false, false, {}, phase(kMlpPhase)});
  be.matmul(s, {ctx.scratch[kLora], m, matrix(kMlpB), {}, y, true, false, {}, phase(kMlpPhase)});
  be.glu(s, {y, m, mlp_width_, Activation::GeluErf, y, phase(kMlpPhase)});         // [m, I]
  be.matmul(s, {y, m, matrix(kDown), {}, a, false, false, {}, phase(kMlpPhase)});  // [m, d]

  // The mixer's input: hidden + linear(f), as HF adds the transformer's output to hidden.
  be.scale(s, {ctx.hidden, m, d, 1.0f, false, mixer_in, phase(kLinearPhase)});
  be.matmul(s, {a, m, matrix(kLinear), {}, mixer_in, true, false, {}, phase(kLinearPhase)});
  ctx.mixer_input = mixer_in;
}

}  // namespace mb

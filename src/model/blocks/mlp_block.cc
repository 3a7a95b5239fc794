// SPDX-License-Identifier: MIT
#include "model/blocks/mlp_block.h"

#include <cmath>
#include <iterator>

#include "model/weight_binder.h"

namespace mb {
namespace {

enum Phase : int { kNormPhase, kUpPhase, kActivationPhase, kDownPhase };
constexpr std::string_view kPhaseNames[] = {"rmsnorm", "up gemm", "activation", "down gemm+residual"};
static_assert(std::size(kPhaseNames) == kDownPhase + 1);

// Scratch buffers, in the order of scratch_widths().
enum Scratch : size_t { kXn, kUpRows, kOut };

int64_t up_rows(const MlpConfig& mlp) {
  return mlp.activation == Activation::SwiGlu ? 2 * mlp.width : mlp.width;
}

}  // namespace

std::vector<TensorSpec> MlpBlock::schema(const ModelConfig& c, const BlockSpec& block) {
  const MlpConfig& mlp = c.hybrid.mlp;
  const int64_t d = c.d_model, W = mlp.width, rows = up_rows(mlp);
  // Granite's fused matrix and names, or Nemotron-H's; llama.cpp's files split Granite's in two
  // (ffn_gate, ffn_up; a file with experts names its shared MLP ffn_*_shexp instead).
  const bool gated = mlp.activation == Activation::SwiGlu, separate = gated && mlp.separate_gate;
  const bool fused = gated && !separate;
  const std::string up = fused ? "input_linear" : "up_proj", down = fused ? "output_linear" : "down_proj";
  const GgufForm up_form = fused ? GgufForm::SplitHalves : GgufForm::Same;
  const auto gguf_up = [&](const char* suffix) {
    return block.gguf(std::string(fused ? "ffn_gate" : "ffn_up") + suffix);
  };
  const auto gguf_second = [&](const char* suffix) {
    return fused ? block.gguf(std::string("ffn_up") + suffix) : "";
  };
  TensorSpec norm{.name = block.norm(), .shape = {d}, .gguf = block.gguf(block.names.gguf_norm)};
  norm.zero_centred = c.family == ModelFamily::Qwen35;  // (1 + w)
  TensorSpec up_w{.name = block.tensor(up + ".weight"),
                  .shape = {rows, d},
                  .role = TensorRole::Matrix,
                  .init = {TensorInit::Uniform, std::sqrt(3.0 / static_cast<double>(d))},
                  .gguf = gguf_up(".weight"),
                  .gguf_form = up_form,
                  .gguf_second = gguf_second(".weight")};
  TensorSpec up_b{.name = block.tensor(up + ".bias"),
                  .shape = {rows},
                  .init = {TensorInit::Uniform, 0.1},
                  .wanted = mlp.bias,
                  .gguf = gguf_up(".bias"),
                  .gguf_form = up_form,
                  .gguf_second = gguf_second(".bias")};
  // ReLU^2 outputs have a mean square of about 3/2 of their inputs' fourth moment; the bound
  // keeps the branch O(1 / sqrt(n_layer)) for either activation.
  TensorSpec down_w{.name = block.tensor(down + ".weight"),
                    .shape = {d, W},
                    .role = TensorRole::Matrix,
                    .init = {TensorInit::Uniform, std::sqrt(3.0 / static_cast<double>(W)) /
                                                      std::sqrt(static_cast<double>(c.n_layer))},
                    .gguf = block.gguf("ffn_down.weight")};
  TensorSpec down_b{.name = block.tensor(down + ".bias"),
                    .shape = {d},
                    .init = {TensorInit::Uniform, 0.1},
                    .wanted = mlp.bias,
                    .gguf = block.gguf("ffn_down.bias")};
  // A separate gate_proj (ffn_gate): up_proj then holds only the up half.
  TensorSpec gate_w = up_w, gate_b = up_b;
  gate_w.name = block.tensor("gate_proj.weight");
  gate_w.gguf = block.gguf("ffn_gate.weight");
  gate_b.name = block.tensor("gate_proj.bias");
  gate_b.gguf = block.gguf("ffn_gate.bias");
  if (separate) {
    up_w.shape[0] = up_b.shape[0] = W;
    gate_w.shape[0] = gate_b.shape[0] = W;
  }
  gate_w.wanted = separate;
  gate_b.wanted = separate && mlp.bias;
  return {norm, up_w, up_b, down_w, down_b, gate_w, gate_b};
}

MlpBlock::MlpBlock(const ModelConfig& c, const BlockSpec& spec, WeightBinder& binder)
    : Block(BlockKind::Mlp, spec),
      d_model_(c.d_model),
      width_(c.hybrid.mlp.width),
      up_rows_(up_rows(c.hybrid.mlp)),
      activation_(c.hybrid.mlp.activation),
      separate_gate_(c.hybrid.mlp.activation == Activation::SwiGlu && c.hybrid.mlp.separate_gate),
      norm_eps_(c.norm_eps),
      residual_multiplier_(static_cast<float>(c.hybrid.residual_multiplier)) {
  weights_ = bind_weights(binder, schema(c, spec));
}

std::vector<int64_t> MlpBlock::scratch_widths() const {
  std::vector<int64_t> widths = {d_model_, up_rows_};
  if (residual_multiplier_ != 1.0f) widths.push_back(d_model_);
  return widths;
}

std::span<const std::string_view> MlpBlock::phase_names() const {
  return kPhaseNames;
}

std::vector<OpQuery> MlpBlock::ops() const {
  std::vector<OpQuery> ops = {{OpKind::Matmul, weight(kUp).host_matrix.dtype},
                              {OpKind::Matmul, weight(kDown).host_matrix.dtype},
                              {OpKind::Glu}};
  if (residual_multiplier_ != 1.0f) ops.push_back({OpKind::Scale});
  if (separate_gate_) ops.push_back({OpKind::Matmul, weight(kGate).host_matrix.dtype});
  return ops;
}

void MlpBlock::forward(LayerContext& ctx) const {
  const Backend& be = ctx.backend;
  Stream& s = ctx.stream;
  const int64_t m = ctx.m;
  const View xn = ctx.scratch[kXn], up = ctx.scratch[kUpRows];
  // With a separate gate_proj, it fills columns [0, W) (the glu's gate) and up_proj, on the same
  // normalized rows, [W, 2 W): the fused matrix's layout.
  be.matmul(s, {.x = ctx.hidden,
                .m = m,
                .w = matrix(separate_gate_ ? kGate : kUp),
                .bias = values(separate_gate_ ? kGateBias : kUpBias),
                .y = up,
                .norm = {values(kNorm), norm_eps_, xn, phase(kNormPhase)},
                .phase = phase(kUpPhase)});  // rms_norm([m, d]) -> [m, up rows] (or the gate's W)
  if (separate_gate_)
    be.matmul(s, {.x = xn,
                  .m = m,
                  .w = matrix(kUp),
                  .bias = values(kUpBias),
                  .y = up.column(width_),
                  .phase = phase(kUpPhase)});                            // [m, d] -> [m, W] beside the gate
  be.glu(s, {up, m, width_, activation_, up, phase(kActivationPhase)});  // -> [m, W] in place
  const View out = residual_multiplier_ != 1.0f ? ctx.scratch[kOut] : View{};
  add_to_residual(ctx, up, matrix(kDown), values(kDownBias), residual_multiplier_, out, phase(kDownPhase));
}

}  // namespace mb

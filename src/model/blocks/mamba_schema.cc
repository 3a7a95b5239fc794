// SPDX-License-Identifier: MIT
#include "model/blocks/mamba_schema.h"

#include <cmath>

namespace mb::mamba_schema {
namespace {

TensorSpec spec(const BlockSpec& block, const char* name, std::vector<int64_t> shape, TensorRole role,
                TensorInit init, const char* gguf) {
  TensorSpec s;
  s.name = block.tensor(name);
  s.shape = std::move(shape);
  s.role = role;
  s.init = init;
  s.gguf = block.gguf(gguf);
  return s;
}

// Unit-variance outputs for unit-variance inputs: uniform with bound sqrt(3 / fan_in).
TensorInit unit_gain(int64_t fan_in) {
  return {TensorInit::Uniform, std::sqrt(3.0 / static_cast<double>(fan_in))};
}

constexpr TensorInit kSmallBias{TensorInit::Uniform, 0.1};
constexpr TensorInit kOnes{TensorInit::Constant, 1.0};

}  // namespace

TensorSpec norm(const BlockSpec& block, int64_t d_model) {
  TensorSpec s = spec(block, "", {d_model}, TensorRole::Vector, kOnes, "");
  s.name = block.norm();
  s.gguf = block.gguf(block.names.gguf_norm);
  return s;
}

TensorSpec in_proj(const BlockSpec& block, int64_t rows, int64_t d_model) {
  return spec(block, "in_proj.weight", {rows, d_model}, TensorRole::Matrix, unit_gain(d_model),
              "ssm_in.weight");
}

TensorSpec in_proj_bias(const BlockSpec& block, int64_t rows, bool wanted) {
  TensorSpec s = spec(block, "in_proj.bias", {rows}, TensorRole::Vector, kSmallBias, "ssm_in.bias");
  s.wanted = wanted;
  return s;
}

TensorSpec conv(const BlockSpec& block, int64_t channels, int64_t kernel_size) {
  TensorSpec s =
      spec(block, "conv1d.weight", {channels, 1, kernel_size}, TensorRole::ConvTaps,
           {TensorInit::Uniform, 1.0 / std::sqrt(static_cast<double>(kernel_size))}, "ssm_conv1d.weight");
  s.gguf_form = GgufForm::SqueezedConv;
  return s;
}

TensorSpec conv_bias(const BlockSpec& block, int64_t channels, bool wanted) {
  TensorSpec s = spec(block, "conv1d.bias", {channels}, TensorRole::Vector, kSmallBias, "ssm_conv1d.bias");
  s.wanted = wanted;
  return s;
}

TensorSpec dt_bias(const BlockSpec& block, int64_t heads) {
  TensorSpec s = spec(block, "dt_bias", {heads}, TensorRole::Vector, {TensorInit::DtBias}, "ssm_dt.bias");
  s.keep_f32 = true;
  return s;
}

TensorSpec a_log(const BlockSpec& block, std::vector<int64_t> shape, TensorInit init) {
  // Mamba-2's per-head A gets a unit column in GGUF files; Mamba-1's [D, N] keeps its shape.
  const bool per_head = shape.size() == 1;
  TensorSpec s = spec(block, "A_log", std::move(shape), TensorRole::Vector, init, "ssm_a");
  s.keep_f32 = true;
  s.gguf_negexp_name = block.tensor("A");
  if (per_head) s.gguf_form = GgufForm::UnitColumn;
  return s;
}

TensorSpec d_skip(const BlockSpec& block, std::vector<int64_t> shape, GgufForm gguf_form) {
  TensorSpec s = spec(block, "D", std::move(shape), TensorRole::Vector, kOnes, "ssm_d");
  s.keep_f32 = true;
  s.gguf_form = gguf_form;
  return s;
}

TensorSpec gate_norm(const BlockSpec& block, int64_t d_inner, TensorInit init, bool wanted) {
  TensorSpec s = spec(block, "norm.weight", {d_inner}, TensorRole::Vector, init, "ssm_norm.weight");
  s.gguf_form = GgufForm::Grouped;
  s.wanted = wanted;
  return s;
}

TensorSpec out_proj(const BlockSpec& block, int64_t d_model, int64_t d_inner, int64_t n_layer) {
  const double bound =
      std::sqrt(3.0 / static_cast<double>(d_inner)) / std::sqrt(static_cast<double>(n_layer));
  return spec(block, "out_proj.weight", {d_model, d_inner}, TensorRole::Matrix, {TensorInit::Uniform, bound},
              "ssm_out.weight");
}

TensorSpec out_proj_bias(const BlockSpec& block, int64_t d_model, bool wanted) {
  TensorSpec s = spec(block, "out_proj.bias", {d_model}, TensorRole::Vector, kSmallBias, "ssm_out.bias");
  s.wanted = wanted;
  return s;
}

}  // namespace mb::mamba_schema

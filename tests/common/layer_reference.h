// SPDX-License-Identifier: MIT
// Plain double-precision pieces of the hybrid models' layers, written from transformers' modeling
// code with nothing shared with the engine beyond reading a checkpoint's tensors and the config's
// sizes: the whole-model references of the MoE layer and all-attention Granite tests build on them.
#pragma once

#include <string>
#include <vector>

#include "io/safetensors.h"
#include "model/config.h"

namespace mb::test::ref {

using Vec = std::vector<double>;

// A checkpoint folder's tensors, each read whole and widened to double (quantized ones
// dequantized); a missing name fails the test and reads as empty.
class Tensors {
 public:
  explicit Tensors(const std::string& dir);
  Vec operator()(const std::string& name) const;

 private:
  TensorSet set_;
};

// y = W x for W [rows, cols] row-major, starting at row `first` of `w`.
Vec product(const Vec& w, const Vec& x, int64_t rows, int64_t first = 0);

Vec rms_norm(const Vec& x, const Vec& weight, double eps);

// The embedding rows of the tokens times the config's embedding multiplier.
std::vector<Vec> embed(const ModelConfig& c, const Vec& embedding, const std::vector<int32_t>& tokens);

// Appends the logits of one residual row: the final norm, the head, / logits_scaling.
void append_logits(const ModelConfig& c, const Vec& head, const Vec& norm_f, const Vec& h,
                   std::vector<float>& logits);

// Causal self-attention of one layer over every position of xs (the layer's input rows after its
// norm), with grouped KV heads, the config's score scale and, when rope_theta > 0, RoPE as
// apply_rotary_pos_emb with rotate_half applies it. `prefix` names the layer's projections, e.g.
// "model.layers.0.self_attn.". Returns o_proj's output rows.
std::vector<Vec> attention(const ModelConfig& c, const Tensors& t, const std::string& prefix,
                           const std::vector<Vec>& xs, double rope_theta = 0.0);

}  // namespace mb::test::ref

// SPDX-License-Identifier: MIT
// Small hybrid configs (Granite-4.0-H, Nemotron-H) that tests then adjust.
#pragma once

#include <cmath>
#include <string>

#include "model/config.h"

namespace mb::test {

// Granite-4.0-H, dense: `pattern` of 'M' and '*' (each layer's mixer, then its shared SwiGLU MLP),
// 4 heads / 2 KV heads of d_model / 4, Mamba-2 heads of 16, and every multiplier away from 1.
inline ModelConfig granite_config(const std::string& pattern = "*MM*", int64_t d_model = 48,
                                  int64_t vocab = 131) {
  ModelConfig c;
  c.family = ModelFamily::GraniteHybrid;
  c.arch = Architecture::Mamba2;
  c.d_model = d_model;
  c.n_layer = static_cast<int64_t>(pattern.size());
  c.vocab_size = vocab;
  c.norm_eps = 1e-5f;
  c.tie_embeddings = true;
  c.ssm.expand = 2;
  c.ssm.d_inner = 2 * d_model;
  c.ssm.d_state = 16;
  c.ssm.d_conv = 4;
  c.ssm.headdim = 16;
  c.ssm.ngroups = 1;
  c.ssm.chunk_size = 32;
  HybridConfig& h = c.hybrid;
  h.pattern = pattern;
  h.attention = {4, 2, d_model / 4, 0.0625, false};
  h.mlp = {40, Activation::SwiGlu, false};
  h.embedding_multiplier = 12.0;
  h.residual_multiplier = 0.22;
  h.logits_scaling = 3.0;
  return c;
}

// Granite-4.0 with RoPE (position_embedding_type "rope"): all attention ("***", the non-hybrid
// granite-4.0-micro / -1b / -350m's form) or mixed with Mamba layers, heads of d_model / 4.
inline ModelConfig granite_rope_config(const std::string& pattern = "***", double theta = 1e7,
                                       int64_t d_model = 40) {
  ModelConfig c = granite_config(pattern, d_model);
  c.hybrid.attention.rope_theta = theta;
  return c;
}

// Nemotron-H, dense: one block per layer of `pattern` ('M', '*', '-'), one KV head of 8 channels
// (not d_model / heads), Mamba-2 mixers 6 heads x 16 = 96 wide (not expand x d_model) in 2 groups,
// an untied LM head, ReLU^2 MLPs, no multipliers.
inline ModelConfig nemotron_config(const std::string& pattern = "M-*M-*", int64_t d_model = 40,
                                   int64_t vocab = 131) {
  ModelConfig c;
  c.family = ModelFamily::NemotronH;
  c.arch = Architecture::Mamba2;
  c.d_model = d_model;
  c.n_layer = static_cast<int64_t>(pattern.size());
  c.vocab_size = vocab;
  c.norm_eps = 1e-5f;
  c.tie_embeddings = false;
  c.ssm.expand = 2;
  c.ssm.d_inner = 96;
  c.ssm.d_state = 16;
  c.ssm.d_conv = 4;
  c.ssm.headdim = 16;
  c.ssm.ngroups = 2;
  c.ssm.chunk_size = 32;
  HybridConfig& h = c.hybrid;
  h.pattern = pattern;
  h.attention = {4, 1, 8, 1.0 / std::sqrt(8.0), false};
  h.mlp = {56, Activation::ReluSquared, false};
  return c;
}

// Granite-4.0-H with mixture-of-experts layers (H-Tiny's form): every layer's shared SwiGLU MLP
// plus `experts` routed SwiGLU experts of `width`, `top_k` chosen by their logits. d_model 40 and
// the widths are multiples of neither 16 nor 64.
inline ModelConfig granite_moe_config(const std::string& pattern = "*MM*", int64_t experts = 7,
                                      int64_t top_k = 2, int64_t width = 20, int64_t d_model = 40) {
  ModelConfig c = granite_config(pattern, d_model);
  c.hybrid.mlp.width = 36;
  c.hybrid.moe = {experts, top_k, width, 0, MoeScoring::SoftmaxTopK, false, 1.0};
  return c;
}

// Nemotron-H with 'E' layers (Nemotron-3-Nano's form): sigmoid routing steered by a correction
// bias, the chosen weights renormalized and scaled by 2.5, ReLU^2 experts and a shared expert.
inline ModelConfig nemotron_moe_config(const std::string& pattern = "ME*E-M", int64_t experts = 9,
                                       int64_t top_k = 3, int64_t width = 24, int64_t d_model = 40) {
  ModelConfig c = nemotron_config(pattern, d_model);
  c.hybrid.moe = {experts, top_k, width, 44, MoeScoring::SigmoidBias, true, 2.5};
  return c;
}

// Nemotron-3-Super's LatentMoE: the 'E' layers' routed experts read fc1_latent_proj x (`latent`
// wide, here narrower than d_model) and their sum goes back through fc2_latent_proj.
inline ModelConfig nemotron_latent_config(const std::string& pattern = "ME*E", int64_t latent = 24,
                                          int64_t experts = 7, int64_t top_k = 3, int64_t width = 20) {
  ModelConfig c = nemotron_moe_config(pattern, experts, top_k, width);
  c.hybrid.moe.latent = latent;
  return c;
}

// Bamba: Granite-4.0-H's blocks (`pattern` of 'M' and '*', each followed by a SwiGLU MLP with
// separate gate and up matrices) with RoPE over half of each head (heads of d_model / 4, base 1e4),
// no multipliers, an untied head.
inline ModelConfig bamba_config(const std::string& pattern = "M*M*", int64_t d_model = 48,
                                int64_t vocab = 131) {
  ModelConfig c = granite_config(pattern, d_model, vocab);
  c.family = ModelFamily::Bamba;
  c.tie_embeddings = false;
  HybridConfig& h = c.hybrid;
  const int64_t head_dim = d_model / 4;
  h.attention = {4, 2, head_dim, 1.0 / std::sqrt(static_cast<double>(head_dim)), false, 1e4, 0.5};
  h.mlp = {40, Activation::SwiGlu, false, true};
  h.embedding_multiplier = h.residual_multiplier = h.logits_scaling = 1.0;
  return c;
}

}  // namespace mb::test

// SPDX-License-Identifier: MIT
// LiquidAI's LFM2 and LFM2-MoE (../shared/specs/hybrids-2.md section 2): the config section the
// rest of ModelConfig does not hold. Their attention, dense MLP and experts use the hybrids'
// sections (config.hybrid.attention, .mlp, .moe); config.hybrid.pattern says which operator each
// layer holds (kShortConvLayer or kAttentionLayer).
#pragma once

#include <cstdint>

namespace mb {

// One character per layer of the pattern: a gated short convolution ("conv" in layer_types).
inline constexpr char kShortConvLayer = 'C';

struct Lfm2Config {
  int64_t conv_kernel = 3;     // conv_L_cache: the short convolution's taps
  bool conv_bias = false;      // refused when true (no released model has one)
  int64_t n_dense_layers = 0;  // LFM2-MoE: its first layers have a dense MLP, the rest experts
  bool expert_bias = true;     // LFM2-MoE: use_expert_bias (the choice's f32 bias per expert)
  int64_t max_positions = 128000;
  // LFM2's dense FFN width, derived from these as Lfm2MLP does (families/lfm2.cc).
  int64_t block_ff_dim = 0;
  bool auto_adjust_ff_dim = true;
  double ffn_dim_multiplier = 1.0;
  int64_t multiple_of = 256;
};

}  // namespace mb

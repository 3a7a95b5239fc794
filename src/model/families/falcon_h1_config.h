// SPDX-License-Identifier: MIT
// Falcon-H1's own config section (../shared/specs/hybrids.md, section 4): the muP multipliers,
// which are applied at run time and never folded into the weights (a tied embedding would carry
// the embedding multiplier into the head, the trap of llama.cpp's converter), and the options of
// its Mamba-2 mixer's gated norm. The sizes live in the shared sections: ModelConfig::ssm (the
// mixer: d_inner = mamba_d_ssm, headdim = mamba_d_head), hybrid.attention (heads, head_dim,
// rope_theta), hybrid.mlp (the SwiGLU width) and hybrid.embedding_multiplier / logits_scaling.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace mb {

struct FalconH1Config {
  double attention_in = 1.0;   // the attention branch's input: q, k and v products of x * this
  double attention_out = 1.0;  // the attention branch's output
  double key = 1.0;            // the keys, before RoPE
  double ssm_in = 1.0;         // the Mamba branch's input
  double ssm_out = 1.0;        // the Mamba branch's output
  double lm_head = 1.0;        // the logits
  // The in_proj output's five segments: z, x, B, C, dt (HF's mup_vector).
  std::vector<double> ssm_multipliers = {1.0, 1.0, 1.0, 1.0, 1.0};
  std::vector<double> mlp_multipliers = {1.0, 1.0};  // the gate product, the down product
  bool mamba_rms_norm = false;   // the grouped gated RMSNorm after the scan; else y * silu(z)
  bool norm_before_gate = true;  // with it: norm(y) * w * silu(z); else norm(y * silu(z)) * w
  bool projectors_bias = false;  // out_proj's bias (in_proj's is mamba_proj_bias)
  int64_t mamba_n_heads = 0;     // d_inner / headdim, checked against them
  std::string hidden_act = "silu";
  int64_t max_positions = 8192;  // max_position_embeddings: only llama.cpp reads it (context_length)
};

}  // namespace mb

// SPDX-License-Identifier: MIT
// The config sections of the hybrid models (Granite-4.0-H, Nemotron-H): which block each layer
// holds, the attention, MLP and mixture-of-experts blocks' sections, and the scalar multipliers
// (../shared/specs/hybrids.md, sections 2 and 3), filled by each family's declaration from its own
// keys (model/families/). Their Mamba layers are Mamba-2 mixers (MambaMixerConfig).
#pragma once

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "ops/ffn.h"
#include "ops/moe.h"

namespace mb {

struct ModelConfig;

struct AttentionConfig {
  int64_t n_heads = 0;
  int64_t n_kv_heads = 0;  // divides n_heads
  int64_t head_dim = 0;    // need not be hidden / heads (Nemotron-H)
  // Multiplies q . k: Granite's attention_multiplier, head_dim^-0.5 elsewhere.
  double scale = 0.0;
  bool bias = false;  // q/k/v/o projection biases
  // Rotary position embedding of q and k (ops/rope.h) with this base; 0: none (NoPE, the
  // hybrids' attention layers). The all-attention Granite-4.0 models set position_embedding_type
  // "rope" and rope_theta.
  double rope_theta = 0.0;
  // The fraction of each head RoPE rotates (transformers' partial_rotary_factor): the first
  // head_dim x factor channels, an even count; Bamba's 0.5. 1: the whole head.
  double partial_rotary_factor = 1.0;

  // RopeParams::rotary_dims for this section.
  int64_t rotary_dims() const { return static_cast<int64_t>(std::llround(head_dim * partial_rotary_factor)); }
};

struct MlpConfig {
  int64_t width = 0;  // the intermediate size
  Activation activation = Activation::SwiGlu;
  bool bias = false;
  // SwiGLU's gate and up products as two matrices, gate_proj and up_proj (Bamba's feed_forward),
  // rather than Granite's one fused input_linear.
  bool separate_gate = false;
};

// The mixture-of-experts layers' section: Granite-4.0-H's (every layer's feed-forward block, when
// num_local_experts > 0: the shared MLP of `mlp` plus routed SwiGLU experts) and Nemotron-H's 'E'
// layers (routed ReLU^2 experts plus one shared expert of shared_width).
struct MoeConfig {
  int64_t n_experts = 0;     // 0: no mixture-of-experts layers
  int64_t top_k = 0;         // experts per token, 1..n_experts
  int64_t width = 0;         // each routed expert's intermediate size
  int64_t shared_width = 0;  // Nemotron-H's shared expert (Granite's shared MLP is mlp.width)
  MoeScoring scoring = MoeScoring::SoftmaxTopK;
  bool normalize = false;  // norm_topk_prob
  double scale = 1.0;      // routed_scaling_factor
  // moe_latent_size (Nemotron-3-Super's LatentMoE): the routed experts read and write vectors of
  // this width, projected from and back to d_model around them; 0: none (they read d_model).
  int64_t latent = 0;
};

// One character per layer, as Nemotron-H's hybrid_override_pattern spells them.
inline constexpr char kMambaLayer = 'M';
inline constexpr char kAttentionLayer = '*';
inline constexpr char kMlpLayer = '-';
inline constexpr char kMoeLayer = 'E';

struct HybridConfig {
  // Nemotron-H: one block per layer, of the pattern's kind. Granite-4.0-H: 'M' or '*' for the
  // layer's mixer, each followed by the layer's shared MLP (with routed experts when
  // moe.n_experts > 0).
  std::string pattern;
  AttentionConfig attention;
  MlpConfig mlp;
  MoeConfig moe;
  // Applied at run time, never folded into (possibly tied) weights: the embedding rows are
  // multiplied by embedding_multiplier, each block's output by residual_multiplier before it is
  // added to the residual stream, and the logits by 1 / logits_scaling.
  double embedding_multiplier = 1.0;
  double residual_multiplier = 1.0;
  double logits_scaling = 1.0;
};

// Throws mb::Error (prefixed by `where`) for sizes the blocks cannot run.
void validate_hybrid(const ModelConfig& config, const std::string& where);

}  // namespace mb

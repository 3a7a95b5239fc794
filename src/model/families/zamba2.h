// SPDX-License-Identifier: MIT
// Zyphra's Zamba2 (Hugging Face model_type "zamba2"; ../shared/specs/hybrids.md section 6 and
// hybrids-2.md section 4): a Mamba-2 backbone whose "hybrid" layers first run one of
// num_mem_blocks shared transformer blocks (cycled in the order the hybrid layers come) on
// RMSNorm(concat(hidden, the original embedding)), with per-use LoRA adapters on the
// projections, and feed its output through the layer's own linear into the layer's Mamba-2 input
// (not into the residual stream). The family's keys are declared in families/zamba2.cc; this is
// the config section they fill (ModelConfig::zamba2).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace mb {

struct Zamba2Config {
  // layers_block_type: the layers whose kind is "hybrid", ascending (HF's hybrid_layer_ids).
  std::vector<int64_t> hybrid_layers;
  int64_t mem_blocks = 1;  // num_mem_blocks: distinct shared blocks, used in turn
  // The shared attention: n_heads heads of head_dim = 2 d_model / n_heads over the 2 d_model wide
  // concat (attention_hidden_size), MHA (num_key_value_heads = num_attention_heads, as vLLM too
  // requires), scores scaled by (head_dim / 2)^-0.5 as HF's Zamba2Attention does.
  int64_t n_heads = 0;
  int64_t n_kv_heads = 0;
  int64_t head_dim = 0;
  int64_t mlp_width = 0;            // intermediate_size of the shared GeGLU MLP
  int64_t adapter_rank = 0;         // the LoRA adapters' rank
  bool attention_adapter = false;   // use_shared_attention_adapter: LoRA on q, k and v too
  bool mem_rope = false;            // use_mem_rope
  bool long_context = false;        // use_long_context: theta * 8^(head_dim / (head_dim - 2))
  double rope_theta = 10000.0;      // as configured (the block applies the long-context rescale)
  int64_t mamba_heads = 8;          // n_mamba_heads (the mixer's headdim = expand d / heads)
  std::string activation = "gelu";  // hidden_act: only the exact GELU

  // The hybrid ordinal (0, 1, ...) of layer `layer`, or -1 for a plain Mamba layer.
  int64_t hybrid_index(int64_t layer) const {
    for (size_t j = 0; j < hybrid_layers.size(); ++j)
      if (hybrid_layers[j] == layer) return static_cast<int64_t>(j);
    return -1;
  }
};

struct Family;
// The family's declaration (families/zamba2.cc).
const Family& zamba2_family();

}  // namespace mb

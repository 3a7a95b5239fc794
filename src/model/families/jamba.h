// SPDX-License-Identifier: MIT
// AI21's Jamba (HF model_type "jamba", llama.cpp architecture "jamba"): Mamba-1 mixers with
// weighted RMSNorms on dt, B and C, attention layers without RoPE every attn_layer_period layers
// at attn_layer_offset, and after every mixer a SwiGLU feed-forward block, which is a mixture of
// experts every expert_layer_period layers at expert_layer_offset when num_experts > 1
// (../shared/specs/hybrids.md section 5, hybrids-2.md section 3). The dense models (Jamba
// Reasoning 3B, Jamba2 3B: num_experts 1) are the same family with no expert layer.
//
// The rest of the config lives where the blocks read it: the Mamba-1 section in
// ModelConfig::ssm, the attention, MLP and experts in ModelConfig::hybrid.
#pragma once

#include <cstdint>

namespace mb {

struct Family;

struct JambaConfig {
  int64_t attn_period = 8;    // attn_layer_period
  int64_t attn_offset = 4;    // attn_layer_offset, below attn_period
  int64_t expert_period = 2;  // expert_layer_period
  int64_t expert_offset = 1;  // expert_layer_offset, below expert_period

  // HF JambaConfig.layers_block_type: layer i is attention iff i % period == offset.
  bool attention_at(int64_t layer) const { return layer % attn_period == attn_offset; }
  // HF JambaConfig.layers_num_experts: a layer is a mixture of experts iff the model has more than
  // one expert and i % expert_layer_period == expert_layer_offset (whatever its mixer).
  bool experts_at(int64_t layer, int64_t n_experts) const {
    return n_experts > 1 && layer % expert_period == expert_offset;
  }
};

// The family's declaration (families/jamba.cc).
const Family& jamba_family();

}  // namespace mb

// SPDX-License-Identifier: MIT
// Model configuration, read from a checkpoint folder's config.json.
//
// Two forms are accepted for Mamba-1: the Hugging Face form (`model_type: "mamba"`,
// hidden_size, num_hidden_layers, state_size, ...) and the original state-spaces form (d_model,
// n_layer, ssm_cfg, ...). Every value is read from the file; the only defaults applied are the
// ones the original code applies itself. Mamba-2 (HF `model_type: "mamba2"`, or the state-spaces
// form with ssm_cfg.layer = "Mamba2"), Mamba-3 (the state-spaces form with ssm_cfg.layer =
// "Mamba3") and FalconMamba (`model_type: "falcon_mamba"`, which is Mamba-1 with a weightless
// RMSNorm on x_proj's three outputs) are parsed here too.
//
// The config has two levels, as the model has: what every model has (sizes of the residual
// stream, vocabulary, norms, head), parsed here, and the config of each kind of block, parsed by
// that block's own code (model/blocks/: the Mamba mixers' section is MambaMixerConfig). A model's
// list of blocks is data built from the config (blocks()), not a class per layer pattern.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "model/architecture.h"
#include "model/blocks/hybrid_config.h"
#include "model/blocks/mamba_config.h"
#include "model/families/falcon_h1_config.h"
#include "model/families/jamba.h"
#include "model/families/lfm2.h"
#include "model/families/qwen35.h"
#include "model/families/zamba2.h"

namespace mb {

// The kinds of blocks a model is built from (model/blocks/); Custom is a block made outside the
// config and added with Model::append_block.
enum class BlockKind {
  Mamba1Mixer,
  Mamba2Mixer,
  Mamba3Mixer,
  Attention,
  Mlp,
  Moe,
  JambaFfn,        // Jamba's SwiGLU MLP or mixture of experts (blocks/jamba_ffn_block.h)
  FalconH1Mixer,   // Falcon-H1: attention and a Mamba-2 mixer in parallel on one norm
  FalconH1Mlp,     // Falcon-H1: SwiGLU with its gate and down multipliers
  ShortConv,       // LFM2's gated short convolution
  Lfm2Attention,   // LFM2's attention: QK-norm, RoPE, out_proj
  Lfm2Mlp,         // LFM2's SwiGLU (w1, w3, w2)
  Lfm2Moe,         // LFM2-MoE's experts
  Zamba2Shared,    // a use of one of Zamba2's shared transformer blocks (blocks/zamba2_block.h)
  GatedDeltaNet,   // Qwen3.5's Gated DeltaNet mixer (blocks/gdn_block.h)
  GatedAttention,  // Qwen3.5's gated attention (blocks/gated_attention_block.h)
  Custom
};

// Where a block's tensors are in the checkpoint: a tensor `t` of the block is named
// prefix + module + t, and its pre-norm prefix + norm ("backbone.layers.3." "mixer." for the
// Mamba families and Nemotron-H; Granite-4.0-H's "model.layers.3." with "mamba.", "self_attn."
// or "shared_mlp."). GGUF files name them "blk.<layer>." + llama.cpp's names.
struct BlockNames {
  std::string prefix;
  std::string module = "mixer.";
  std::string norm = "norm.weight";
  std::string gguf_norm = "attn_norm.weight";
};

// One block of the model: its kind, the checkpoint layer whose tensors it holds (a Granite layer
// holds two blocks: its mixer and its MLP) and their names.
struct BlockSpec {
  BlockKind kind;
  int64_t layer;
  BlockNames names{};

  std::string tensor(const std::string& name) const { return names.prefix + names.module + name; }
  std::string norm() const { return names.prefix + names.norm; }
  std::string gguf(const std::string& name) const { return "blk." + std::to_string(layer) + "." + name; }
};

// The checkpoint families: the pure Mamba models (the mixer in `arch`) and the hybrids, whose
// Mamba layers are Mamba-2 (arch Mamba2) between attention and MLP layers.
enum class ModelFamily {
  Mamba,
  GraniteHybrid,
  NemotronH,
  Bamba,
  Jamba,
  FalconH1,
  Lfm2,
  Lfm2Moe,
  Zamba2,
  Qwen35
};

struct ModelConfig {
  Architecture arch = Architecture::Mamba1;
  int64_t d_model = 0;
  int64_t n_layer = 0;
  int64_t vocab_size = 0;  // tokens the model can produce (logits width)
  int64_t vocab_rows = 0;  // rows of the embedding: vocab_size padded to pad_vocab_size_multiple
  int64_t pad_vocab_size_multiple = 1;
  float norm_eps = 1e-5f;
  bool tie_embeddings = true;
  std::vector<int32_t> eos_token_ids;  // from "eos_token_id" (a number or a list); may be empty

  // The Mamba mixer of every layer (model/blocks/mamba_config.h).
  MambaMixerConfig ssm;

  // The hybrids (model/blocks/hybrid_config.h): which block each layer holds and their sections.
  ModelFamily family = ModelFamily::Mamba;
  HybridConfig hybrid;
  // Jamba's layer pattern (model/families/jamba.h).
  JambaConfig jamba;
  FalconH1Config falcon;  // Falcon-H1 (model/families/falcon_h1_config.h)
  Lfm2Config lfm2;        // LFM2 and LFM2-MoE (model/families/lfm2.h)
  Zamba2Config zamba2;    // family Zamba2 (model/families/zamba2.h)
  Qwen35Config qwen35;    // Qwen3.5 / Qwen3.6 (model/families/qwen35.h)

  // The blocks of the model, in order: for the pure Mamba families, every layer's mixer; for the
  // hybrids, what the layer pattern says.
  std::vector<BlockSpec> blocks() const;
};

// Parses and validates; throws mb::Error naming the key and the problem.
ModelConfig parse_model_config(const nlohmann::json& json, const std::string& source);
ModelConfig load_model_config(const std::string& dir);

// The HF form of `config`, as `make-model` writes it.
nlohmann::json model_config_to_hf_json(const ModelConfig& config);
// The original state-spaces form.
nlohmann::json model_config_to_original_json(const ModelConfig& config);

}  // namespace mb

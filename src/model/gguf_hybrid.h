// SPDX-License-Identifier: MIT
// The metadata of llama.cpp's hybrid GGUF architectures, `granitehybrid` (Granite-4.0-H, dense
// or with experts), `nemotron_h` and `nemotron_h_moe` (Nemotron-H), read into and written from the
// engine's config (see gguf_checkpoint.h for the tensors).
//
// What a layer is comes from two per-layer keys, each a scalar (every layer alike) or an array
// of block_count integers, as llama.cpp's converter writes them:
//   {arch}.attention.head_count_kv  0 on every layer without attention;
//   {arch}.feed_forward_length      nemotron_h: the MLP width on `-` layers, 0 elsewhere;
//                                   nemotron_h_moe: the experts' width on `E` layers, 0 elsewhere;
//                                   granitehybrid: the shared MLP's width (every layer has one),
//                                   or each routed expert's in a file with experts.
// granitehybrid: a layer is Mamba-2 iff its head_count_kv is 0, else attention, each followed
// by the shared MLP (and the routed experts when expert_count > 0). nemotron_h (one block per
// layer): Mamba-2 iff both are 0, attention iff only head_count_kv is set, else MLP, or a mixture
// of experts in a file with experts (expert_count > 0, which nemotron_h_moe requires); a layer with
// both is refused.
// The experts: expert_count and expert_used_count (top-k, in [1, expert_count]); Granite's shared
// MLP width is expert_shared_feed_forward_length; Nemotron-H's expert and shared-expert widths are
// expert_feed_forward_length and expert_shared_feed_forward_length, its renormalization and
// routed scaling expert_weights_norm and expert_weights_scale (absent: none, as in llama.cpp).
// Grouped routing (expert_group_count > 1), latent projections (moe_latent_size), other than one
// shared expert and multi-token-prediction blocks (nextn_predict_layers) are refused naming the key.
// Granite's multipliers are {arch}.attention.scale, .embedding_scale, .residual_scale and
// .logit_scale (0 or absent: llama.cpp's defaults, 1 / sqrt(head size) and no scaling);
// Nemotron-H's head size is {arch}.attention.key_length (= value_length). granitehybrid files that
// use RoPE (rope.scaling.finetuned true or absent, as Bamba's) are refused naming the key.
#pragma once

#include <cstdint>
#include <string>

#include <nlohmann/json_fwd.hpp>

#include "io/gguf.h"
#include "model/config.h"

namespace mb {

inline constexpr const char* kGgufGraniteHybrid = "granitehybrid";
inline constexpr const char* kGgufNemotronH = "nemotron_h";
inline constexpr const char* kGgufNemotronHMoe = "nemotron_h_moe";

// The Hugging Face config.json equivalent of a granitehybrid or nemotron_h file's metadata, so
// that parse_model_config applies the same checks to both; `vocab_rows` is the embedding's rows.
// Throws mb::Error naming the file and the key for missing, malformed or inconsistent metadata.
nlohmann::json gguf_hybrid_config_json(const GgufFile& file, const std::string& arch, int64_t vocab_rows);

// What parse_model_config cannot take from a Hugging Face config of the family but the file
// says: Nemotron-H's attention scale when {arch}.attention.scale sets one.
void apply_gguf_hybrid_overrides(const GgufFile& file, const std::string& arch, ModelConfig& config);

// The {arch}.* metadata of a hybrid, as llama.cpp's converter writes it; `vocab_rows` is the
// embedding's rows.
void set_gguf_hybrid_metadata(GgufWriter& writer, const ModelConfig& config, int64_t vocab_rows);

// The GGUF architecture of a config's family ("mamba", "mamba2", "granitehybrid", "nemotron_h",
// "nemotron_h_moe").
std::string gguf_architecture(const ModelConfig& config);

}  // namespace mb

// The metadata of llama.cpp's hybrid GGUF architectures, `granitehybrid` (Granite-4.0-H) and
// `nemotron_h` (Nemotron-H), read into and written from the engine's config (see
// gguf_checkpoint.h for the tensors).
//
// What a layer is comes from two per-layer keys, each a scalar (every layer alike) or an array
// of block_count integers, as llama.cpp's converter writes them:
//   {arch}.attention.head_count_kv  0 on every layer without attention;
//   {arch}.feed_forward_length      nemotron_h: the MLP width on `-` layers, 0 elsewhere;
//                                   granitehybrid: the shared MLP's width (every layer has one).
// granitehybrid: a layer is Mamba-2 iff its head_count_kv is 0, else attention, each followed
// by the shared MLP. nemotron_h (one block per layer): Mamba-2 iff both are 0, attention iff
// only head_count_kv is set, MLP iff only feed_forward_length is; a layer with both is refused.
// Granite's multipliers are {arch}.attention.scale, .embedding_scale, .residual_scale and
// .logit_scale (0 or absent: llama.cpp's defaults, 1 / sqrt(head size) and no scaling);
// Nemotron-H's head size is {arch}.attention.key_length (= value_length). Mixture-of-experts
// files (expert_count > 0) and granitehybrid files that use RoPE (rope.scaling.finetuned true or
// absent, as Bamba's) are refused naming the key.
#pragma once

#include <cstdint>
#include <string>

#include <nlohmann/json_fwd.hpp>

#include "io/gguf.h"
#include "model/config.h"

namespace mb {

inline constexpr const char* kGgufGraniteHybrid = "granitehybrid";
inline constexpr const char* kGgufNemotronH = "nemotron_h";

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

// The GGUF architecture of a config's family ("mamba", "mamba2", "granitehybrid", "nemotron_h").
std::string gguf_architecture(const ModelConfig& config);

}  // namespace mb

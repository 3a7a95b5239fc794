// SPDX-License-Identifier: MIT
// Qwen3.5 / Qwen3.6 dense (HF `qwen3_5`, text part `qwen3_5_text`; llama.cpp `qwen35`;
// ../shared/specs/gated-deltanet.md): the config section the rest of ModelConfig does not hold.
// The gated attention and the SwiGLU MLP use the hybrids' sections (config.hybrid.attention,
// .mlp); config.hybrid.pattern says which mixer each layer holds (kGatedDeltaNetLayer or
// kAttentionLayer).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include <nlohmann/json_fwd.hpp>

namespace mb {

// One character per layer of the pattern: a Gated DeltaNet mixer ("linear_attention").
inline constexpr char kGatedDeltaNetLayer = 'G';

struct Qwen35Config {
  int64_t n_key_heads = 0;    // linear_num_key_heads (nk)
  int64_t n_value_heads = 0;  // linear_num_value_heads (nv), a multiple of nk
  int64_t key_dim = 0;        // linear_key_head_dim (dk)
  int64_t value_dim = 0;      // linear_value_head_dim (dv)
  int64_t conv_kernel = 4;    // linear_conv_kernel_dim
  int64_t full_attention_interval = 4;
  bool attn_output_gate = true;  // refused when false (every released model gates)
  int64_t mtp_layers = 0;        // mtp_num_hidden_layers: read, kept for speculative decoding, not run
  int64_t max_positions = 262144;
  // Where the text model's tensors are: "model.language_model." in the vision-language
  // checkpoints (model_type qwen3_5), "model." in the text-only ones (qwen3_5_text).
  std::string prefix = "model.";
  // Value head h reads key head h % nk (llama.cpp's GGUF files reorder the value heads so),
  // else h / (nv / nk) as Hugging Face's checkpoints do.
  bool tiled_heads = false;

  int64_t conv_width() const { return 2 * n_key_heads * key_dim + n_value_heads * value_dim; }
};

// A nested vision-language config (model_type qwen3_5 with a text_config) as the flat config of
// its text model: text_config's keys, with the top level's model_type and tie_word_embeddings
// (which the released files repeat inside text_config). nullopt for any other config.
std::optional<nlohmann::json> qwen35_text_config(const nlohmann::json& config);

}  // namespace mb

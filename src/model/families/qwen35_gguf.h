// SPDX-License-Identifier: MIT
// llama.cpp's `qwen35` GGUF layout of Qwen3.5 (../shared/specs/gated-deltanet.md section 8), what
// the GGUF reader and writer need beyond the declared keys.
//
// Value heads: where nv != nk, llama.cpp's converter reorders the value heads of every per-head
// GDN tensor from the Hugging Face grouped order (value head g r + j belongs to key head g) to a
// tiled one (new head j nk + g), and its runtime has value head h read key head h % nk. mambacpp
// keeps a file's order as it is and runs the op with tiled_heads (ModelConfig::qwen35): the
// per-value-head columns of out_proj cannot be reordered back inside quantized blocks. Writing a
// Hugging Face folder as GGUF applies the converter's reorder.
#pragma once

#include <string>
#include <vector>

#include "model/config.h"
#include "model/weight_schema.h"

namespace mb {

// Reorders `values` (the spec's tensor in its PyTorch layout, f32) from grouped to tiled value
// heads when `spec` is one of a Qwen3.5 GDN layer's per-value-head tensors and the config holds
// grouped heads; returns whether it changed anything.
bool qwen35_tile_value_heads(const ModelConfig& config, const TensorSpec& spec, std::vector<float>& values);

// Whether a qwen35 file's tensor `layer` is past the model's layers, in the MTP block(s) the
// converter appends (nextn_predict_layers), which the engine does not run.
bool qwen35_is_mtp_layer(const ModelConfig& config, int64_t layer);

}  // namespace mb

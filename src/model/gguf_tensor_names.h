// SPDX-License-Identifier: MIT
// The tensors of llama.cpp's mamba, mamba2, granitehybrid, nemotron_h and nemotron_h_moe GGUF
// files, their Hugging Face names and shapes (see gguf_checkpoint.h), shared by the GGUF reader
// and writer: the weight schema's (weight_schema.h), which names every tensor once with its GGUF
// name and form.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "model/config.h"
#include "model/weight_schema.h"

namespace mb {

// FalconMamba's own epsilon for the dt/B/C norms. llama.cpp has no key for it (it uses the
// layer norm's), so files this engine writes carry it under a key of their own, which
// llama.cpp ignores.
inline constexpr const char* kGgufMixerRmsEpsKey = "mambacpp.mixer_rms_epsilon";

// The engine dtype of a ggml type (F32, F16, BF16, Q8_0, Q4_0, Q4_K, Q6_K), and back.
std::optional<DType> gguf_engine_dtype(uint32_t ggml_type);
uint32_t gguf_ggml_type(DType dtype);

// The model's tensors a GGUF file holds (the wanted specs of the weight schema with a GGUF name),
// in the order files are written; throws mb::Error for Mamba-3, which llama.cpp does not define.
std::vector<TensorSpec> gguf_tensor_specs(const ModelConfig& config);
// The GGUF dims (GGML order) of a spec's tensor (of each half, for SplitHalves).
std::vector<int64_t> gguf_dims(const TensorSpec& spec, const ModelConfig& config);

// The rows of `rows` rows of `row_bytes` bytes each, with the rows of every head of `head_dim`
// rows reordered from the Hugging Face order to llama.cpp's (GgufForm::HeadPairsInterleaved), or
// back. Rows are moved whole, so any storage type keeps its bytes. Throws mb::Error for an odd
// head size or a row count that is not a whole number of heads, which the converter cannot pair.
std::vector<uint8_t> reorder_head_rows(const uint8_t* data, size_t row_bytes, int64_t rows, int64_t head_dim,
                                       bool to_gguf);

}  // namespace mb

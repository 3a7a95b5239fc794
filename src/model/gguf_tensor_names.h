// The tensors of llama.cpp's mamba and mamba2 GGUF files, their Hugging Face names and shapes
// (see gguf_checkpoint.h), shared by the GGUF reader and writer.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "model/config.h"

namespace mb {

// FalconMamba's own epsilon for the dt/B/C norms. llama.cpp has no key for it (it uses the
// layer norm's), so files this engine writes carry it under a key of their own, which
// llama.cpp ignores.
inline constexpr const char* kGgufMixerRmsEpsKey = "mambacpp.mixer_rms_epsilon";

// What a tensor is, which fixes its shape for a config.
enum class GgufTensorKind {
  Embedding,
  FinalNorm,
  LmHead,
  Norm,
  InProj,
  InProjBias,
  Conv,
  ConvBias,
  XProj,
  DtProj,
  DtBias,
  A,
  D,
  GateNorm,
  OutProj,
  OutProjBias
};

struct GgufTensorRole {
  const char* gguf;  // for per-layer tensors, the part after "blk.N."
  const char* hf;    // for per-layer tensors, the part after "backbone.layers.N."
  bool per_layer;
  GgufTensorKind kind;
};

// The engine dtype of a ggml type (F32, F16, BF16, Q8_0, Q4_0, Q4_K, Q6_K), and back.
std::optional<DType> gguf_engine_dtype(uint32_t ggml_type);
uint32_t gguf_ggml_type(DType dtype);

// The roles of an architecture, in the order files are written; throws mb::Error for Mamba-3,
// which llama.cpp does not define.
const std::vector<GgufTensorRole>& gguf_tensor_roles(Architecture arch);
const GgufTensorRole* find_gguf_role(const std::vector<GgufTensorRole>& roles, const std::string& gguf_suffix,
                                     bool per_layer);
// Whether the config has this tensor (biases, the untied LM head).
bool gguf_role_wanted(const GgufTensorRole& role, const ModelConfig& config);
// The PyTorch shape the engine binds, and the GGUF dims (GGML order) of the same tensor.
std::vector<int64_t> gguf_role_hf_shape(const GgufTensorRole& role, const ModelConfig& config);
std::vector<int64_t> gguf_role_dims(const GgufTensorRole& role, const ModelConfig& config);

}  // namespace mb

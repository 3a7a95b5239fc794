// GGUF checkpoints of llama.cpp's `mamba` (Mamba-1 and FalconMamba) and `mamba2` architectures.
//
// Reading maps the file onto what the engine loads from a Hugging Face folder: a ModelConfig
// from the {arch}.* metadata and a TensorSet under the Hugging Face tensor names, pointing into
// the mapping (no copy). GGUF dims are reversed into PyTorch shapes and the few tensors
// llama.cpp's converter reshapes get their Hugging Face shapes back:
//   token_embd.weight            backbone.embeddings.weight
//   output_norm.weight           backbone.norm_f.weight
//   output.weight                lm_head.weight (absent: tied to the embedding)
//   blk.N.attn_norm.weight       backbone.layers.N.norm.weight
//   blk.N.ssm_in.{weight,bias}   ...mixer.in_proj.*
//   blk.N.ssm_conv1d.weight      ...mixer.conv1d.weight   ({K, C} -> [C, 1, K])
//   blk.N.ssm_conv1d.bias        ...mixer.conv1d.bias
//   blk.N.ssm_x.weight           ...mixer.x_proj.weight   (Mamba-1)
//   blk.N.ssm_dt.weight          ...mixer.dt_proj.weight  (Mamba-1)
//   blk.N.ssm_dt.bias            ...mixer.dt_proj.bias (Mamba-1), ...mixer.dt_bias (Mamba-2)
//   blk.N.ssm_a                  ...mixer.A               (Mamba-2: {1, H} -> [H])
//   blk.N.ssm_d                  ...mixer.D               (Mamba-2: {1, H} -> [H])
//   blk.N.ssm_norm.weight        ...mixer.norm.weight     (Mamba-2: {di/ng, ng} -> [di])
//   blk.N.ssm_out.{weight,bias}  ...mixer.out_proj.*
// GGUF stores A = -exp(A_log) rather than A_log, so it is bound as `mixer.A`, which the Mamba-1
// and Mamba-2 models use as given (see mamba1.cc and mamba2.cc for the one rounding in which
// that differs from starting at A_log).
//
// Writing produces files llama.cpp loads: the same keys, names, shapes and f32 tensors as its
// convert_hf_to_gguf.py (norms, conv weights, A, D and biases stay f32) and its quantizer.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "io/gguf.h"
#include "io/safetensors.h"
#include "model/config.h"

namespace mb {

// True when `path` is a regular file that starts with the GGUF magic.
bool is_gguf_file(const std::string& path);

struct GgufCheckpoint {
  ModelConfig config;
  std::shared_ptr<const TensorSet> tensors;  // under the Hugging Face names above
};

// Throws mb::Error naming the file for missing or malformed metadata, an unsupported
// architecture, unknown, missing or misshapen tensors.
GgufCheckpoint open_gguf_checkpoint(const std::string& path);
GgufCheckpoint open_gguf_checkpoint(const GgufFile& file);

// The storage of a written file, as llama.cpp's file types name them. Q4_K_M is Q4_K for most
// matrices and Q6_K for the LM head and some layers' out_proj (see gguf_export.cc).
enum class GgufFileType { F32, F16, BF16, Q8_0, Q4_0, Q4_K_M };
GgufFileType parse_gguf_file_type(const std::string& name);  // f32 | f16 | bf16 | q8_0 | q4_0 | q4_k_m

struct GgufExportOptions {
  GgufFileType type = GgufFileType::F32;
  std::string name;  // general.name; empty = none
  // Extra metadata written after the model's, e.g. the tokenizer.ggml.* keys (gguf_tokenizer.h).
  std::vector<std::pair<std::string, GgufValue>> extra_metadata;
};

// Writes the model `config` + `tensors` (Hugging Face names, as a folder or open_gguf_checkpoint
// gives them) as a GGUF file, atomically. Throws mb::Error for what llama.cpp's formats cannot
// hold (Mamba-3, Mamba-2 without the gated norm or with per-channel D or a dt limit, input
// projections).
void write_gguf_checkpoint(const std::string& path, const ModelConfig& config, const TensorSet& tensors,
                           const GgufExportOptions& options);

}  // namespace mb

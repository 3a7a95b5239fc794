// SPDX-License-Identifier: MIT
// GGUF checkpoints of llama.cpp's `mamba` (Mamba-1 and FalconMamba), `mamba2`, `granitehybrid`
// (Granite-4.0-H, dense or with experts), `nemotron_h` and `nemotron_h_moe` (Nemotron-H)
// architectures.
//
// Reading maps the file onto what the engine loads from a Hugging Face folder: a ModelConfig
// from the {arch}.* metadata (for the hybrids, gguf_hybrid.h: the layer kinds from the per-layer
// head_count_kv and feed_forward_length) and a TensorSet under the Hugging Face tensor names,
// pointing into the mapping (no copy). Each tensor's GGUF name ("token_embd.weight",
// "blk.N.ssm_in.weight", ...) and the reshaping llama.cpp's converter applies to it (the conv
// weight squeezed, Mamba-2's A and D given a unit column, its norm weight split by group, Granite's
// fused [gate; up] matrices split into ffn_gate and ffn_up (ffn_gate_shexp / ffn_up_shexp and, for
// its experts, the 3-D ffn_gate_exps / ffn_up_exps), Nemotron-H's per-expert matrices stacked into
// 3-D ffn_up_exps / ffn_down_exps (ggml dims {cols, rows, experts}), the rows of each q and k head reordered
// as for RoPE) come from the weight schema (weight_schema.h, GgufForm): GGUF dims are reversed
// into PyTorch shapes and those tensors get their Hugging Face shapes back. The q and k rows are
// put back in the Hugging Face order (a copy of those tensors), so the attention sums run as from
// the folder; the gate and up halves stay two mapped tensors that binding joins (weight_binder.h).
// Dims are compared as llama.cpp compares them, with trailing unit dims dropped from both sides:
// ggml writes only the dims up to the last one that is not 1, so llama-quantize's files hold an
// ngroups-1 norm as {d_inner}. GGUF stores A = -exp(A_log) rather than A_log, so it is bound under
// the schema's name for A, which the Mamba-1 and Mamba-2 mixers use as given (see
// model/blocks/mamba1_block.cc for the one rounding in which that differs from starting at A_log).
// Tensors in other ggml types than F32, F16, BF16, Q8_0, Q4_0, Q4_K and Q6_K (Q5_0, which
// llama-quantize's Q4_K_M gives matrices whose rows are not whole Q4_K blocks, among them) are
// refused naming the tensor.
//
// Writing produces files llama.cpp loads: the same keys, names, shapes and f32 tensors as its
// convert_hf_to_gguf.py (norms, conv weights, A, D and biases stay f32) and its quantizer.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/progress.h"
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
// matrices and Q6_K for the LM head and some layers' attn_v and ffn_down (see gguf_export.cc).
enum class GgufFileType { F32, F16, BF16, Q8_0, Q4_0, Q4_K_M };
GgufFileType parse_gguf_file_type(const std::string& name);  // f32 | f16 | bf16 | q8_0 | q4_0 | q4_k_m

struct GgufExportOptions {
  GgufFileType type = GgufFileType::F32;
  std::string name;  // general.name; empty = none
  // Extra metadata written after the model's, e.g. the tokenizer.ggml.* keys (gguf_tokenizer.h).
  std::vector<std::pair<std::string, GgufValue>> extra_metadata;
  // When set, the tensors' source bytes are reported to it as each is converted, then the write.
  ProgressLine* progress = nullptr;
};

// Writes the model `config` + `tensors` (Hugging Face names, as a folder or open_gguf_checkpoint
// gives them) as a GGUF file, atomically. Throws mb::Error for what llama.cpp's formats cannot
// hold (Mamba-3, Mamba-2 without the gated norm or with per-channel D or a dt limit, input
// projections, hybrids with Mamba projection biases or an odd attention head size).
void write_gguf_checkpoint(const std::string& path, const ModelConfig& config, const TensorSet& tensors,
                           const GgufExportOptions& options);

}  // namespace mb

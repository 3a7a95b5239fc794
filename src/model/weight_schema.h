// SPDX-License-Identifier: MIT
// The tensors of a model, written once.
//
// Each block lists the tensors of its layer (model/blocks/*), and the model lists its own
// (embedding, final norm, LM head, input projection), as TensorSpecs: the checkpoint name and
// shape, how the engine stores it, how make-model draws it and what llama.cpp's GGUF files call
// it. That one list drives binding at load (bind_weights), make-model's fixture writer and the
// GGUF reader's and writer's name and shape tables, so a tensor's name appears once in src/.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "backends/backend.h"
#include "model/config.h"
#include "ops/matmul.h"

namespace mb {

class WeightBinder;

// How the engine stores a tensor once bound.
enum class TensorRole {
  Matrix,    // packed once for the matmul (ops/matmul.h, ops/quant_matmul.h) in the load dtype
  Vector,    // an f32 copy (norm weights, biases, D, dt bias, A_log)
  ConvTaps,  // a depthwise conv1d weight [channels, 1, K], re-laid out tap-major [K, channels] in f32
  // A mixture of experts' matrices, shape [experts, rows, cols]: each expert's [rows, cols] packed
  // on its own as a Matrix is. The checkpoint holds them stacked in one 3-D tensor under `name`
  // (Granite's input_linear, transformers' own saves, llama.cpp's *_exps tensors), or, where the
  // spec has an expert_name, as one 2-D tensor per expert (Nemotron-H's experts.{e}.up_proj).
  Experts,
};

// How make-model draws a tensor's values (model/make_model.cc), in schema order.
struct TensorInit {
  enum Kind {
    Constant,       // every value `value` (norm weights 1, D 1)
    Uniform,        // uniform in [-value, value)
    AroundOne,      // 1 + uniform in [-value, value)
    DtBias,         // softplus^-1 of a log-uniform dt in [1e-3, 1e-1], as mamba_ssm initializes it
    LogStateIndex,  // Mamba-1's A_log: log(n + 1) for state index n of a [channels, N] tensor
    LogUniformA,    // Mamba-2's A_log: log of a uniform A in [1, 16]
  };
  Kind kind = Constant;
  double value = 1.0;
};

// What llama.cpp's converter does to a tensor on its way into a GGUF file (the PyTorch shape,
// reversed, after this).
enum class GgufForm {
  Same,
  SqueezedConv,  // [C, 1, K] -> [C, K]
  UnitColumn,    // [n] -> [n, 1] (Mamba-2's A and D)
  Grouped,       // [d_inner] -> [G, d_inner / G] (Mamba-2's gated-norm weight)
  // [2 W, ...] -> two [W, ...] tensors, `gguf` the first half's rows and `gguf_second` the
  // second's (Granite's fused [gate; up] matrix: ffn_gate and ffn_up).
  SplitHalves,
  // The rows of each head of the attention head size reordered as llama.cpp's converter does
  // for RoPE (LlamaModel.permute: row h * hd/2 + i of a head becomes row 2 i + h), which it also
  // applies to the q and k products of these NoPE models. The shape is unchanged.
  HeadPairsInterleaved,
};

// A TensorSet read from a GGUF file holds each SplitHalves tensor as its two halves, under these
// names (the file's two tensors, mapped, never joined there): binding joins them
// (WeightBinder::matrix) and the GGUF writer copies them.
std::string gguf_half_name(const std::string& name, int half);

struct TensorSpec {
  std::string name{};            // as the checkpoint names it (Hugging Face or state-spaces)
  std::vector<int64_t> shape{};  // as the checkpoint stores it
  TensorRole role = TensorRole::Vector;
  TensorInit init{};
  bool wanted = true;  // false: the config says the checkpoint has no such tensor (a bias, say)
  // make-model writes it in f32 whatever the checkpoint dtype, as the reference keeps it; a Matrix
  // is also packed in f32 whatever the load dtype (a MoE router: its scores choose the experts,
  // and llama.cpp never quantizes it either).
  bool keep_f32 = false;
  // Experts stored one tensor per expert: the name with "{e}" for the expert's index.
  std::string expert_name{};
  // Per-expert tensors stored in two halves (Jamba's experts.{e}.gate_proj and .up_proj, rows
  // [0, R/2) and [R/2, R) of the [R, cols] matrix): expert_name names the first, this the second.
  std::string expert_second_name{};
  // A second accepted checkpoint form: another name (the state-spaces embedding) or shape
  // (Mamba-2's per-channel D); empty when none.
  std::string alt_name{};
  std::vector<int64_t> alt_shape{};
  std::string gguf{};  // llama.cpp's name, "" where GGUF has none
  GgufForm gguf_form = GgufForm::Same;
  std::string gguf_second{};  // SplitHalves: the second half's name
  // GGUF stores A = -exp(A_log) rather than A_log; the reader binds it under this name (the
  // engine uses A as given), and the writer computes it from A_log.
  std::string gguf_negexp_name{};
  // A zero-centred norm weight (Qwen3.5's (1 + w) RMSNorms): the checkpoint holds w, the engine
  // binds 1 + w (rounded once in f32, as the reference computes it) and runs a plain RMSNorm.
  // llama.cpp's files hold 1 + w already: the GGUF reader binds it under gguf_plus_one_name(name),
  // used as it is (never adding 1 twice), and the writer adds 1 to a folder's w.
  bool zero_centred = false;
};

std::string gguf_plus_one_name(const std::string& name);

// A bound tensor: its host form and, after upload, the backend's copy.
struct Weight {
  WeightMatrix host_matrix{};                // Matrix role
  std::vector<WeightMatrix> host_experts{};  // Experts role: one per expert
  const float* host_values = nullptr;        // other roles
  int64_t count = 0;
  // The checkpoint held the spec's alternative (alt_name, alt_shape, gguf_negexp_name).
  bool bound_alt = false;
  Matrix matrix{};                // the backend's copy of a Matrix
  std::vector<Matrix> experts{};  // the backend's copies of the experts' matrices
  View values{};                  // the backend's copy of a vector
  explicit operator bool() const {
    return host_matrix.data != nullptr || host_values != nullptr || !host_experts.empty();
  }
};

// Binds every wanted spec (missing or misshapen tensors throw mb::Error naming them); unwanted
// specs give empty weights, so the result is indexed like `specs`.
std::vector<Weight> bind_weights(WeightBinder& binder, const std::vector<TensorSpec>& specs);

// Makes the backend's copy of every bound weight; `store` owns them.
void upload_weights(const Backend& backend, std::vector<Weight>& weights,
                    std::vector<std::unique_ptr<Storage>>& store);

// The model's own tensors, in make-model's order: the embedding (then, with an input dimension,
// the input projection and its bias) come first, then every block's, then the final norm and an
// untied LM head.
struct ModelTensors {
  std::vector<TensorSpec> head{};  // embedding, input projection
  std::vector<TensorSpec> tail{};  // final norm, LM head
};
// `hf_names`: the Hugging Face names (else the state-spaces ones, for the embedding); `input_dim`
// 0 for none.
ModelTensors model_tensor_specs(const ModelConfig& config, bool hf_names, int64_t input_dim);
enum ModelTensor { kEmbedding = 0, kInputProj = 1, kInputProjBias = 2 };
enum ModelTailTensor { kFinalNorm = 0, kLmHead = 1 };

// The specs of block `block` (its layer's tensors), from the block kind's schema.
std::vector<TensorSpec> block_tensor_specs(const ModelConfig& config, const BlockSpec& block);
// Every spec of the model, in make-model's order.
std::vector<TensorSpec> all_tensor_specs(const ModelConfig& config, bool hf_names, int64_t input_dim);

// expert_name with "{e}" replaced by `expert`.
std::string expert_tensor_name(const std::string& expert_name, int64_t expert);

// "backbone.layers.<layer>." and "blk.<layer>.": the prefixes of a layer's tensors.
std::string layer_prefix(int64_t layer);
std::string gguf_layer_prefix(int64_t layer);

}  // namespace mb

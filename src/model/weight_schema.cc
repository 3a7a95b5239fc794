// SPDX-License-Identifier: MIT
#include "model/weight_schema.h"

#include <cmath>

#include "core/error.h"
#include "model/blocks/attention_block.h"
#include "model/blocks/falcon_h1_block.h"
#include "model/blocks/gated_attention_block.h"
#include "model/blocks/gdn_block.h"
#include "model/blocks/jamba_ffn_block.h"
#include "model/blocks/lfm2_blocks.h"
#include "model/blocks/mamba1_block.h"
#include "model/blocks/mamba2_block.h"
#include "model/blocks/mamba3_block.h"
#include "model/blocks/mlp_block.h"
#include "model/blocks/moe_block.h"
#include "model/blocks/zamba2_block.h"
#include "model/weight_binder.h"

namespace mb {

std::string layer_prefix(int64_t layer) {
  return "backbone.layers." + std::to_string(layer) + ".";
}

std::string gguf_layer_prefix(int64_t layer) {
  return "blk." + std::to_string(layer) + ".";
}

std::string expert_tensor_name(const std::string& expert_name, int64_t expert) {
  std::string name = expert_name;
  const size_t at = name.find("{e}");
  MB_CHECK(at != std::string::npos);
  return name.replace(at, 3, std::to_string(expert));
}

std::string gguf_plus_one_name(const std::string& name) {
  return name + " (1 + w)";
}

std::string gguf_half_name(const std::string& name, int half) {
  return name + (half == 0 ? " (first half)" : " (second half)");
}

namespace {

int64_t element_count(const std::vector<int64_t>& shape) {
  int64_t count = 1;
  for (int64_t extent : shape) count *= extent;
  return count;
}

Weight bind_one(WeightBinder& binder, const TensorSpec& spec) {
  Weight w;
  std::string name = spec.name;
  std::vector<int64_t> shape = spec.shape;
  // A GGUF file's A = -exp(A_log), or the checkpoint's other name for the tensor.
  if (!spec.gguf_negexp_name.empty() && binder.has(spec.gguf_negexp_name)) {
    name = spec.gguf_negexp_name;
    w.bound_alt = true;
  } else if (spec.zero_centred && binder.has(gguf_plus_one_name(name))) {
    name = gguf_plus_one_name(name);
    w.bound_alt = true;
  } else if (!spec.alt_name.empty() && !binder.has(name) && binder.has(spec.alt_name)) {
    name = spec.alt_name;
    w.bound_alt = true;
  }
  if (!spec.alt_shape.empty() && binder.shape_of(name) == spec.alt_shape && spec.alt_shape != spec.shape) {
    shape = spec.alt_shape;
    w.bound_alt = true;
  }
  switch (spec.role) {
    case TensorRole::Matrix:
      w.host_matrix = spec.keep_f32 ? binder.matrix(name, shape[0], shape[1], DType::F32)
                                    : binder.matrix(name, shape[0], shape[1]);
      break;
    case TensorRole::Experts:
      w.host_experts =
          binder.experts(name, spec.expert_name, shape[0], shape[1], shape[2], spec.expert_second_name);
      break;
    case TensorRole::Vector:
      w.host_values = binder.f32(name, shape);
      w.count = element_count(shape);
      if (spec.zero_centred && !w.bound_alt) {
        std::vector<float> folded(w.host_values, w.host_values + w.count);
        for (float& v : folded) v = 1.0f + v;
        w.host_values = binder.keep(std::move(folded));
      }
      break;
    case TensorRole::ConvTaps:
      w.host_values = binder.conv_taps(name, shape[0], shape[2]);
      w.count = shape[0] * shape[2];
      break;
  }
  return w;
}

}  // namespace

std::vector<Weight> bind_weights(WeightBinder& binder, const std::vector<TensorSpec>& specs) {
  std::vector<Weight> weights;
  weights.reserve(specs.size());
  for (const TensorSpec& spec : specs) weights.push_back(spec.wanted ? bind_one(binder, spec) : Weight{});
  return weights;
}

void upload_weights(const Backend& backend, std::vector<Weight>& weights,
                    std::vector<std::unique_ptr<Storage>>& store) {
  for (Weight& w : weights) {
    w.matrix = {};
    w.experts.clear();
    w.values = {};
    for (const WeightMatrix& expert : w.host_experts) {
      store.push_back(backend.upload_matrix(expert));
      w.experts.push_back({store.back().get(), expert.dtype, expert.rows, expert.cols});
    }
    if (w.host_matrix.data != nullptr) {
      store.push_back(backend.upload_matrix(w.host_matrix));
      w.matrix = {store.back().get(), w.host_matrix.dtype, w.host_matrix.rows, w.host_matrix.cols};
    } else if (w.host_values != nullptr) {
      store.push_back(backend.upload_floats(w.host_values, w.count));
      w.values = {store.back().get(), 0, w.count};
    }
  }
}

ModelTensors model_tensor_specs(const ModelConfig& c, bool hf_names, int64_t input_dim) {
  const int64_t d = c.d_model;
  // Embedding rows with RMS 2/sqrt(d) give logits of a few units against a unit-RMS final state.
  const TensorInit vocabulary{TensorInit::Uniform, 2.0 * std::sqrt(3.0 / static_cast<double>(d))};
  // Granite-4.0-H, Bamba, Jamba, Falcon-H1 and Zamba2 name their own tensors as the Llama family does (their
  // final norm is final_layernorm); the other families as Mamba.
  const bool final_layernorm = c.family == ModelFamily::Bamba || c.family == ModelFamily::Jamba ||
                               c.family == ModelFamily::FalconH1 || c.family == ModelFamily::Zamba2;
  const bool granite = c.family == ModelFamily::GraniteHybrid || final_layernorm;
  // LFM2 names them as Llama does too, but its final norm is model.embedding_norm (GGUF
  // token_embd_norm): applied after the last layer, never to the embeddings, despite both names.
  const bool lfm2 = c.family == ModelFamily::Lfm2 || c.family == ModelFamily::Lfm2Moe;
  const char* hf_embedding = granite || lfm2 ? "model.embed_tokens.weight" : "backbone.embeddings.weight";
  const char* original_embedding = "backbone.embedding.weight";
  TensorSpec embedding{.name = hf_names ? hf_embedding : original_embedding,
                       .shape = {c.vocab_rows, d},
                       .role = TensorRole::Matrix,
                       .init = vocabulary,
                       .alt_name = granite || lfm2 ? "" : (hf_names ? original_embedding : hf_embedding),
                       .gguf = "token_embd.weight"};
  const double input_bound = input_dim > 0 ? std::sqrt(3.0 / static_cast<double>(input_dim)) : 0.0;
  TensorSpec input_proj{.name = "input_proj.weight",
                        .shape = {d, input_dim},
                        .role = TensorRole::Matrix,
                        .init = {TensorInit::Uniform, input_bound},
                        .wanted = input_dim > 0};
  TensorSpec input_bias{
      .name = "input_proj.bias", .shape = {d}, .init = {TensorInit::Uniform, 0.1}, .wanted = input_dim > 0};
  TensorSpec norm_f{.name = final_layernorm ? "model.final_layernorm.weight"
                            : granite       ? "model.norm.weight"
                                            : "backbone.norm_f.weight",
                    .shape = {d},
                    .gguf = "output_norm.weight"};
  if (lfm2) {
    norm_f.name = "model.embedding_norm.weight";
    norm_f.gguf = "token_embd_norm.weight";
  }
  // Qwen3.5: its text model's prefix (model.language_model. in the vision-language checkpoints)
  // and a zero-centred final norm.
  if (c.family == ModelFamily::Qwen35) {
    embedding.name = c.qwen35.prefix + "embed_tokens.weight";
    embedding.alt_name.clear();
    norm_f.name = c.qwen35.prefix + "norm.weight";
    norm_f.zero_centred = true;
  }
  TensorSpec lm_head{.name = "lm_head.weight",
                     .shape = {c.vocab_rows, d},
                     .role = TensorRole::Matrix,
                     .init = vocabulary,
                     .wanted = !c.tie_embeddings,
                     .gguf = "output.weight"};
  return {{embedding, input_proj, input_bias}, {norm_f, lm_head}};
}

std::vector<TensorSpec> block_tensor_specs(const ModelConfig& config, const BlockSpec& block) {
  switch (block.kind) {
    case BlockKind::Mamba1Mixer:
      return Mamba1Block::schema(config, block);
    case BlockKind::Mamba2Mixer:
      return Mamba2Block::schema(config, block);
    case BlockKind::Mamba3Mixer:
      return Mamba3Block::schema(config, block);
    case BlockKind::Attention:
      return AttentionBlock::schema(config, block);
    case BlockKind::Mlp:
      return MlpBlock::schema(config, block);
    case BlockKind::Moe:
      return MoeBlock::schema(config, block);
    case BlockKind::JambaFfn:
      return JambaFfnBlock::schema(config, block);
    case BlockKind::FalconH1Mixer:
      return FalconH1MixerBlock::schema(config, block);
    case BlockKind::FalconH1Mlp:
      return FalconH1MlpBlock::schema(config, block);
    case BlockKind::ShortConv:
      return ShortConvBlock::schema(config, block);
    case BlockKind::Lfm2Attention:
      return Lfm2AttentionBlock::schema(config, block);
    case BlockKind::Lfm2Mlp:
      return Lfm2MlpBlock::schema(config, block);
    case BlockKind::Lfm2Moe:
      return Lfm2MoeBlock::schema(config, block);
    case BlockKind::Zamba2Shared:
      return Zamba2SharedBlock::schema(config, block);
    case BlockKind::GatedDeltaNet:
      return GdnBlock::schema(config, block);
    case BlockKind::GatedAttention:
      return GatedAttentionBlock::schema(config, block);
    case BlockKind::Custom:
      break;
  }
  throw Error("unknown block kind");
}

std::vector<TensorSpec> all_tensor_specs(const ModelConfig& config, bool hf_names, int64_t input_dim) {
  const ModelTensors own = model_tensor_specs(config, hf_names, input_dim);
  std::vector<TensorSpec> specs = own.head;
  for (const BlockSpec& block : config.blocks())
    for (TensorSpec& spec : block_tensor_specs(config, block)) specs.push_back(std::move(spec));
  specs.insert(specs.end(), own.tail.begin(), own.tail.end());
  return specs;
}

}  // namespace mb

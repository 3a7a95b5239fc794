// SPDX-License-Identifier: MIT
// Writing GGUF files (see gguf_checkpoint.h).
//
// Storage per tensor, as llama.cpp's convert_hf_to_gguf.py and llama-quantize choose it:
// - f32 always: 1-D tensors, "*_norm.weight", ssm_conv1d.weight, the MoE router
//   (ffn_gate_inp.weight, which neither the converter nor llama-quantize quantizes), and every
//   tensor whose name does not end in ".weight" (ssm_a, ssm_d, biases, exp_probs_b.bias);
// - the file type otherwise (token_embd, output, ssm_in, ssm_x, ssm_dt, ssm_out, attn_q/k/v/
//   output, ffn_gate/up/down, the shared experts' ffn_*_shexp and the 3-D ffn_*_exps, quantized
//   row by row over every expert).
// Q4_K_M follows llama-quantize's choices (llama_tensor_get_type_impl) for what these models
// have: Q6_K for the LM head (output.weight, or token_embd.weight when tied; Q8_0 when its rows
// are not whole Q6_K blocks), for attn_v.weight where use_more_bits(i, n) holds over the n attn_v
// tensors and for every ffn_down tensor (ffn_down, ffn_down_shexp, ffn_down_exps) where it holds
// for the i-th ffn_down tensor over block_count (so a dense Nemotron-H file counts its MLP
// layers, not their layer numbers) or, in a file of more than one expert, for the layer its name
// says; Q4_K elsewhere (ffn_gate_exps and ffn_up_exps included). With exactly 8 experts
// llama-quantize gives attn_v and attn_k Q8_0 and attn_output Q5_K, which the engine does not
// compute with; those get Q6_K here. A
// matrix whose rows are not a multiple of the block falls back as the engine's load-time
// quantization does (storable_dtype in ops/quant_matmul.h: Q8_0 when rows are a multiple of 32,
// else BF16; llama-quantize falls back to Q5_0 and F16, which the engine does not compute with),
// so a quantized file holds exactly the weights of its folder loaded with --dtype.
// A tensor already stored in the type chosen for it (re-writing a GGUF file) keeps its bytes.
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/error.h"
#include "model/families/qwen35_gguf.h"
#include "model/family.h"
#include "model/gguf_checkpoint.h"
#include "model/gguf_hybrid.h"
#include "model/gguf_tensor_names.h"
#include "model/weight_binder.h"
#include "ops/quant.h"
#include "ops/quant_matmul.h"

namespace mb {
namespace {

constexpr uint32_t kFileTypeF32 = 0, kFileTypeF16 = 1, kFileTypeQ4_0 = 2, kFileTypeQ8_0 = 7,
                   kFileTypeQ4_K_M = 15, kFileTypeBF16 = 32;

bool quantized(GgufFileType type) {
  return type == GgufFileType::Q8_0 || type == GgufFileType::Q4_0 || type == GgufFileType::Q4_K_M;
}

uint32_t file_type_id(GgufFileType type) {
  switch (type) {
    case GgufFileType::F32:
      return kFileTypeF32;
    case GgufFileType::F16:
      return kFileTypeF16;
    case GgufFileType::BF16:
      return kFileTypeBF16;
    case GgufFileType::Q8_0:
      return kFileTypeQ8_0;
    case GgufFileType::Q4_0:
      return kFileTypeQ4_0;
    case GgufFileType::Q4_K_M:
      return kFileTypeQ4_K_M;
  }
  return kFileTypeF32;
}

// llama.cpp's use_more_bits(i_layer, n_layers).
bool use_more_bits(int64_t i, int64_t n) {
  return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2;
}

// What llama-quantize's Q4_K_M rule needs to know across tensors: the model's layers and experts,
// the attn_v tensors of the file and how many of them and of the ffn_down tensors it has seen.
struct QuantCounters {
  int64_t n_layer = 0, n_experts = 0;
  int64_t n_attn_v = 0, i_attn_v = 0, i_ffn_down = 0;
};

// The layer of a "blk.N.*" name.
int64_t layer_of(const std::string& name) {
  return std::stoll(name.substr(4, name.find('.', 4) - 4));
}

bool contains(const std::string& name, const char* part) {
  return name.find(part) != std::string::npos;
}

// The ggml type of a tensor: f32 for every tensor but the matrices and experts (norms, biases, A,
// D, the conv weight and the router), the file type for those (see the top of the file).
uint32_t storage_type(const TensorSpec& spec, const std::string& name, const std::vector<int64_t>& ne,
                      GgufFileType type, bool head, QuantCounters& counters) {
  const bool matrix = spec.role == TensorRole::Matrix || spec.role == TensorRole::Experts;
  if (ne.size() <= 1 || !matrix || spec.keep_f32) return kGgmlF32;
  uint32_t chosen = kGgmlF32;
  switch (type) {
    case GgufFileType::F32:
      return kGgmlF32;
    case GgufFileType::F16:
      return kGgmlF16;
    case GgufFileType::BF16:
      return kGgmlBF16;
    case GgufFileType::Q8_0:
      chosen = kGgmlQ8_0;
      break;
    case GgufFileType::Q4_0:
      chosen = kGgmlQ4_0;
      break;
    case GgufFileType::Q4_K_M:
      chosen = kGgmlQ4_K;
      if (head) {
        chosen = ne[0] % dtype_block_weights(DType::Q6_K) == 0 ? kGgmlQ6_K : kGgmlQ8_0;
      } else if (contains(name, "attn_v.weight")) {
        if (use_more_bits(counters.i_attn_v, counters.n_attn_v)) chosen = kGgmlQ6_K;
        // llama-quantize's rule for Mixtral-like models of exactly 8 experts.
        if (counters.n_experts == 8) chosen = kGgmlQ8_0;
        ++counters.i_attn_v;
      } else if (contains(name, "attn_k.weight")) {
        if (counters.n_experts == 8) chosen = kGgmlQ8_0;
      } else if (contains(name, "attn_output.weight")) {
        // llama-quantize gives these Q5_K with 8 experts, which the engine does not compute with:
        // Q6_K, the next type up it has, keeps at least those bits.
        if (counters.n_experts == 8) chosen = kGgmlQ6_K;
      } else if (contains(name, "ffn_down")) {
        // Every ffn_down tensor (ffn_down, ffn_down_shexp, ffn_down_exps) over block_count: the
        // i-th one seen, or, in a file of more than one expert, the layer its name says.
        const int64_t i = counters.n_experts > 1 ? layer_of(name) : counters.i_ffn_down;
        if (use_more_bits(i, counters.n_layer)) chosen = kGgmlQ6_K;
        ++counters.i_ffn_down;
      }
      break;
  }
  return gguf_ggml_type(storable_dtype(*gguf_engine_dtype(chosen), ne[0]));
}

// `values` ([rows, row_length] row-major) in ggml type `type`, quantized row by row (on every
// core: the bytes do not depend on the thread count).
std::vector<uint8_t> encode(const std::vector<float>& values, uint32_t type, int64_t row_length) {
  const DType dtype = *gguf_engine_dtype(type);
  if (!dtype_is_quantized(dtype)) return encode_f32(values, dtype);
  const int64_t rows = static_cast<int64_t>(values.size()) / row_length;
  std::vector<uint8_t> bytes(static_cast<size_t>(rows) * dtype_row_bytes(dtype, row_length));
  quantize_rows(ComputeContext{omp_get_max_threads()}, values.data(), DType::F32, rows, row_length, dtype,
                bytes.data());
  return bytes;
}

void check_exportable(const ModelConfig& c, const TensorSet& tensors) {
  if (tensors.find(model_tensor_specs(c, true, 0).head[kInputProj].name) != nullptr)
    throw Error("models with an input projection cannot be written as GGUF (llama.cpp has no such tensor)");
  // What llama.cpp's layout of the family has no place for (model/families/).
  const Family* family = find_family(c);
  if (family == nullptr) throw Error("the config belongs to no declared family");
  if (family->check_gguf) family->check_gguf(c);
}

// A GGUF tensor's content in the dtype its source holds it: `bytes`, rows of ne[0] elements.
struct Content {
  std::vector<uint8_t> bytes;
  DType dtype;
};

const StoredTensor& find_tensor(const TensorSet& tensors, const std::string& name) {
  const StoredTensor* tensor = tensors.find(name);
  if (tensor == nullptr) throw Error("the model has no tensor '" + name + "'");
  if (!tensor->dtype)
    throw Error("tensor '" + name + "' is stored as " + tensor->dtype_string +
                ", which cannot be converted (only F32, F16, BF16, Q8_0, Q4_0, Q4_K and Q6_K can)");
  return *tensor;
}

void check_shape(const StoredTensor& tensor, const std::vector<int64_t>& shape) {
  if (tensor.shape != shape)
    throw Error("tensor '" + tensor.name + "' has shape " + tensor.shape_string() + "; GGUF needs " +
                shape_string(shape));
}

Content stacked_experts(const TensorSet& tensors, const TensorSpec& spec, const std::string& expert_name,
                        int64_t rows);

// Half `half` of a SplitHalves spec's tensor: from the fused tensor of a folder (each leading
// index's rows [half * R, (half + 1) * R)), or the half a GGUF checkpoint holds.
Content split_half(const TensorSet& tensors, const TensorSpec& spec, int half) {
  const size_t split = spec.shape.size() >= 2 ? spec.shape.size() - 2 : 0;
  std::vector<int64_t> half_shape = spec.shape;
  half_shape[split] /= 2;
  // Experts a folder stores per expert in two halves (Jamba's gate_proj and up_proj): stacked.
  if (!spec.expert_second_name.empty() && tensors.find(spec.name) == nullptr &&
      tensors.find(gguf_half_name(spec.name, half)) == nullptr)
    return stacked_experts(tensors, spec, half == 0 ? spec.expert_name : spec.expert_second_name,
                           half_shape[split]);
  if (tensors.find(spec.name) == nullptr) {
    const StoredTensor& tensor = find_tensor(tensors, gguf_half_name(spec.name, half));
    check_shape(tensor, half_shape);
    return {std::vector<uint8_t>(tensor.data, tensor.data + tensor.byte_size), *tensor.dtype};
  }
  const StoredTensor& fused = find_tensor(tensors, spec.name);
  check_shape(fused, spec.shape);
  int64_t outer = 1;
  for (size_t i = 0; i < split; ++i) outer *= spec.shape[i];
  const size_t half_bytes = fused.byte_size / static_cast<size_t>(2 * outer);
  Content content{std::vector<uint8_t>(static_cast<size_t>(outer) * half_bytes), *fused.dtype};
  for (int64_t o = 0; o < outer; ++o)
    std::memcpy(content.bytes.data() + o * half_bytes, fused.data + (2 * o + half) * half_bytes, half_bytes);
  return content;
}

// Experts a folder stores one tensor per expert (Nemotron-H's experts.{e}.up_proj), stacked into
// the [experts, rows, cols] tensor llama.cpp's converter writes (in f32 if their dtypes differ).
// `expert_name` and `rows`: one half of each expert (expert_second_name's form), or the whole.
Content stacked_experts(const TensorSet& tensors, const TensorSpec& spec, const std::string& expert_name,
                        int64_t rows) {
  const int64_t experts = spec.shape[0];
  const std::vector<int64_t> shape = {rows, spec.shape[2]};
  std::vector<const StoredTensor*> parts;
  for (int64_t e = 0; e < experts; ++e) {
    parts.push_back(&find_tensor(tensors, expert_tensor_name(expert_name, e)));
    check_shape(*parts.back(), shape);
  }
  const DType dtype = std::all_of(parts.begin(), parts.end(),
                                  [&](const StoredTensor* t) { return *t->dtype == *parts[0]->dtype; })
                          ? *parts[0]->dtype
                          : DType::F32;
  Content content{{}, dtype};
  for (const StoredTensor* part : parts) {
    if (*part->dtype == dtype) {
      content.bytes.insert(content.bytes.end(), part->data, part->data + part->byte_size);
      continue;
    }
    std::vector<float> values(static_cast<size_t>(part->element_count()));
    dequantize_row(*part->dtype, part->data, part->element_count(), values.data());
    const auto* bytes = reinterpret_cast<const uint8_t*>(values.data());
    content.bytes.insert(content.bytes.end(), bytes, bytes + values.size() * sizeof(float));
  }
  return content;
}

// The content of the GGUF tensor `half` of `spec` (0 unless SplitHalves), in llama.cpp's layout.
Content gguf_content(const TensorSet& tensors, const TensorSpec& spec, int half, const std::string& source,
                     const ModelConfig& c) {
  if (spec.gguf_form == GgufForm::SplitHalves) return split_half(tensors, spec, half);
  if (spec.role == TensorRole::Experts && !spec.expert_name.empty() && tensors.find(source) == nullptr)
    return stacked_experts(tensors, spec, spec.expert_name, spec.shape[1]);
  const StoredTensor& tensor = find_tensor(tensors, source);
  check_shape(tensor, spec.shape);
  Content content{std::vector<uint8_t>(tensor.data, tensor.data + tensor.byte_size), *tensor.dtype};
  if (spec.gguf_form == GgufForm::HeadPairsInterleaved) {
    const int64_t rows = spec.shape[0];
    content.bytes = reorder_head_rows(content.bytes.data(), content.bytes.size() / static_cast<size_t>(rows),
                                      rows, c.hybrid.attention.head_dim, true);
  }
  return content;
}

std::vector<float> widen(const Content& content) {
  // Rows of whole blocks: the bytes are one long run of elements (or blocks).
  const int64_t count = dtype_is_quantized(content.dtype)
                            ? static_cast<int64_t>(content.bytes.size() / dtype_block_bytes(content.dtype)) *
                                  dtype_block_weights(content.dtype)
                            : static_cast<int64_t>(content.bytes.size() / dtype_size(content.dtype));
  std::vector<float> values(static_cast<size_t>(count));
  dequantize_row(content.dtype, content.bytes.data(), count, values.data());
  return values;
}

}  // namespace

GgufFileType parse_gguf_file_type(const std::string& name) {
  std::string lower;
  for (char ch : name) lower += static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  if (lower == "f32") return GgufFileType::F32;
  if (lower == "f16") return GgufFileType::F16;
  if (lower == "bf16") return GgufFileType::BF16;
  if (lower == "q8_0") return GgufFileType::Q8_0;
  if (lower == "q4_0") return GgufFileType::Q4_0;
  if (lower == "q4_k_m") return GgufFileType::Q4_K_M;
  throw Error("unknown GGUF type '" + name + "' (expected f32, f16, bf16, q8_0, q4_0 or q4_k_m)");
}

void write_gguf_checkpoint(const std::string& path, const ModelConfig& c, const TensorSet& tensors,
                           const GgufExportOptions& options) {
  check_exportable(c, tensors);
  const ModelTensors own = model_tensor_specs(c, true, 0);
  const TensorSpec& embedding_spec = own.head[kEmbedding];
  const std::string embedding_name =
      tensors.find(embedding_spec.name) ? embedding_spec.name : embedding_spec.alt_name;
  const StoredTensor* embedding = tensors.find(embedding_name);
  if (embedding == nullptr || embedding->shape.size() != 2)
    throw Error("the model has no 2-D embedding ('" + embedding_spec.name + "')");
  // GGUF has one vocabulary size: the embedding's rows, which the LM head must share.
  ModelConfig shaped = c;
  shaped.vocab_rows = embedding->shape[0];

  GgufWriter writer;
  writer.set("general.architecture", GgufValue::string(gguf_architecture(c)));
  if (!options.name.empty()) writer.set("general.name", GgufValue::string(options.name));
  {
    // GGUF has one vocabulary size, the embedding's rows (read back as vocab_size).
    ModelConfig rows = shaped;
    rows.vocab_size = shaped.vocab_rows;
    set_gguf_family_metadata(*find_family(c), writer, rows);
  }
  writer.set("general.file_type", GgufValue::u32(file_type_id(options.type)));
  if (quantized(options.type)) writer.set("general.quantization_version", GgufValue::u32(2));
  for (const auto& [key, value] : options.extra_metadata) writer.set(key, value);

  if (options.progress != nullptr) {
    uint64_t total = 0;
    for (const auto& [name, tensor] : tensors.tensors()) total += tensor.byte_size;
    options.progress->start("", total, ProgressUnit::Bytes);
  }
  const std::vector<TensorSpec> specs = gguf_tensor_specs(shaped);
  QuantCounters counters;
  counters.n_layer = c.n_layer;
  counters.n_experts = c.hybrid.moe.n_experts;
  for (const TensorSpec& spec : specs) counters.n_attn_v += contains(spec.gguf, "attn_v.weight");
  for (const TensorSpec& spec : specs) {
    std::string source = spec.name == embedding_spec.name ? embedding_name : spec.name;
    // Hugging Face folders hold A_log; files opened by open_gguf_checkpoint hold A.
    const bool from_log = !spec.gguf_negexp_name.empty() && tensors.find(spec.gguf_negexp_name) == nullptr;
    if (!spec.gguf_negexp_name.empty() && !from_log) source = spec.gguf_negexp_name;
    // A zero-centred norm: a folder's w becomes llama.cpp's 1 + w; a GGUF file's is copied.
    const bool add_one = spec.zero_centred && tensors.find(gguf_plus_one_name(spec.name)) == nullptr;
    if (spec.zero_centred && !add_one) source = gguf_plus_one_name(spec.name);
    // The LM head: the untied one, or the embedding it is tied to.
    const bool head =
        spec.name == own.tail[kLmHead].name || (c.tie_embeddings && spec.name == embedding_spec.name);
    const std::vector<int64_t> ne = gguf_dims(spec, shaped);
    const int halves = spec.gguf_form == GgufForm::SplitHalves ? 2 : 1;
    for (int half = 0; half < halves; ++half) {
      const std::string& name = half == 0 ? spec.gguf : spec.gguf_second;
      Content content = gguf_content(tensors, spec, half, source, shaped);
      const uint32_t type = storage_type(spec, name, ne, options.type, head, counters);
      // A Qwen3.5 folder's value heads go into llama.cpp's tiled order (families/qwen35_gguf.h).
      const bool retile = c.family == ModelFamily::Qwen35 && !c.qwen35.tiled_heads;
      if (!from_log && !add_one && !retile && gguf_ggml_type(content.dtype) == type) {
        writer.add_tensor(name, ne, type, std::move(content.bytes));
        continue;
      }
      std::vector<float> values = widen(content);
      // llama.cpp's converter stores A = -exp(A_log); computed in double, rounded once.
      if (from_log)
        for (float& v : values) v = static_cast<float>(-std::exp(static_cast<double>(v)));
      if (add_one)
        for (float& v : values) v = 1.0f + v;
      if (retile) qwen35_tile_value_heads(c, spec, values);
      writer.add_tensor(name, ne, type, encode(values, type, ne[0]));
    }
    if (options.progress != nullptr) {
      if (const StoredTensor* tensor = tensors.find(source)) options.progress->advance(tensor->byte_size);
      for (int64_t e = 0; !spec.expert_name.empty() && e < spec.shape[0]; ++e)
        if (const StoredTensor* tensor = tensors.find(expert_tensor_name(spec.expert_name, e)))
          options.progress->advance(tensor->byte_size);
    }
  }
  if (options.progress != nullptr) options.progress->start("writing " + path, 0, ProgressUnit::Bytes);
  writer.write(path);
}

}  // namespace mb

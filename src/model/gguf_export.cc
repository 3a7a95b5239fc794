// Writing GGUF files (see gguf_checkpoint.h).
//
// Storage per tensor, as llama.cpp's convert_hf_to_gguf.py and llama-quantize choose it:
// - f32 always: 1-D tensors, "*_norm.weight", ssm_conv1d.weight, and every tensor whose name
//   does not end in ".weight" (ssm_a, ssm_d, biases);
// - the file type otherwise (token_embd, output, ssm_in, ssm_x, ssm_dt, ssm_out).
// Q4_K_M follows llama.cpp's rule for Q4_K_M, simplified to what a Mamba model has: Q6_K for the
// LM head (output.weight, or token_embd.weight when tied) and for ssm_out.weight in the layers
// llama.cpp's use_more_bits picks for its ffn_down and attn_v (the first and last eighth and
// every third in between), Q4_K elsewhere. A matrix whose rows are not a multiple of the block
// falls back as the engine's load-time quantization does (storable_dtype in ops/quant_matmul.h:
// Q8_0 when rows are a multiple of 32, else BF16; llama.cpp's quantizer falls back to other
// types), so a quantized file holds exactly the weights of its folder loaded with --dtype.
#include <omp.h>

#include <cmath>

#include "core/error.h"
#include "model/gguf_checkpoint.h"
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
bool use_more_bits(int64_t layer, int64_t n_layer) {
  return layer < n_layer / 8 || layer >= 7 * n_layer / 8 || (layer - n_layer / 8) % 3 == 2;
}

// The ggml type of a tensor: f32 for every tensor but the matrices (norms, biases, A, D and the
// conv weight), the file type for matrices (see the top of the file).
uint32_t storage_type(const TensorSpec& spec, const std::vector<int64_t>& ne, GgufFileType type,
                      int64_t layer, int64_t n_layer, bool head) {
  if (ne.size() <= 1 || spec.role != TensorRole::Matrix) return kGgmlF32;
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
    case GgufFileType::Q4_K_M: {
      const bool more_bits = spec.residual_output && use_more_bits(layer, n_layer);
      chosen = head || more_bits ? kGgmlQ6_K : kGgmlQ4_K;
      break;
    }
  }
  return gguf_ggml_type(storable_dtype(*gguf_engine_dtype(chosen), ne[0]));
}

// The values of a stored tensor as f32 (quantized ones dequantized as GGML does).
std::vector<float> widen(const StoredTensor& tensor) {
  if (!tensor.dtype)
    throw Error("tensor '" + tensor.name + "' is stored as " + tensor.dtype_string +
                ", which cannot be converted (only F32, F16, BF16, Q8_0, Q4_0, Q4_K and Q6_K can)");
  std::vector<float> values(static_cast<size_t>(tensor.element_count()));
  dequantize_row(*tensor.dtype, tensor.data, static_cast<int64_t>(values.size()), values.data());
  return values;
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
  if (c.family != ModelFamily::Mamba)
    throw Error("hybrid models (Granite-4.0-H, Nemotron-H) cannot be written as GGUF yet");
  if (c.arch == Architecture::Mamba3)
    throw Error("Mamba-3 models cannot be written as GGUF (llama.cpp has no mamba3)");
  if (tensors.find(model_tensor_specs(c, true, 0).head[kInputProj].name) != nullptr)
    throw Error("models with an input projection cannot be written as GGUF (llama.cpp has no such tensor)");
  if (c.arch == Architecture::Mamba2) {
    if (!c.ssm.gated_norm) throw Error("Mamba-2 models without the gated norm cannot be written as GGUF");
    if (c.ssm.dt_limit_min != 0.0 || std::isfinite(c.ssm.dt_limit_max))
      throw Error("Mamba-2 models with a dt limit cannot be written as GGUF (llama.cpp has no key for it)");
  }
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
  const bool mamba2 = c.arch == Architecture::Mamba2;
  const std::string arch = mamba2 ? "mamba2" : "mamba";
  GgufWriter writer;
  writer.set("general.architecture", GgufValue::string(arch));
  if (!options.name.empty()) writer.set("general.name", GgufValue::string(options.name));
  const auto u32 = [](int64_t value) { return GgufValue::u32(static_cast<uint32_t>(value)); };
  // The same keys, and the same placeholder values, as convert_hf_to_gguf.py's Mamba models.
  writer.set(arch + ".context_length", u32(1 << 20));
  writer.set(arch + ".embedding_length", u32(c.d_model));
  writer.set(arch + ".feed_forward_length", u32(0));
  writer.set(arch + ".attention.head_count", u32(0));
  writer.set(arch + ".block_count", u32(c.n_layer));
  writer.set(arch + ".ssm.conv_kernel", u32(c.ssm.d_conv));
  writer.set(arch + ".ssm.inner_size", u32(c.ssm.d_inner));
  writer.set(arch + ".ssm.state_size", u32(c.ssm.d_state));
  writer.set(arch + ".ssm.time_step_rank", u32(mamba2 ? c.ssm.n_heads() : c.ssm.dt_rank));
  if (mamba2) writer.set(arch + ".ssm.group_count", u32(c.ssm.ngroups));
  writer.set(arch + ".attention.layer_norm_rms_epsilon", GgufValue::f32(c.norm_eps));
  if (!mamba2) writer.set(arch + ".ssm.dt_b_c_rms", GgufValue::boolean(c.ssm.mixer_rms_norm));
  if (c.ssm.mixer_rms_norm && static_cast<float>(c.ssm.mixer_rms_eps) != c.norm_eps)
    writer.set(kGgufMixerRmsEpsKey, GgufValue::f32(static_cast<float>(c.ssm.mixer_rms_eps)));
  writer.set("general.file_type", u32(file_type_id(options.type)));
  if (quantized(options.type)) writer.set("general.quantization_version", u32(2));
  for (const auto& [key, value] : options.extra_metadata) writer.set(key, value);

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
  if (options.progress != nullptr) {
    uint64_t total = 0;
    for (const auto& [name, tensor] : tensors.tensors()) total += tensor.byte_size;
    options.progress->start("", total, ProgressUnit::Bytes);
  }
  for (const TensorSpec& spec : gguf_tensor_specs(shaped)) {
    std::string source = spec.name == embedding_spec.name ? embedding_name : spec.name;
    // Hugging Face folders hold A_log; files opened by open_gguf_checkpoint hold A.
    const bool from_log = !spec.gguf_negexp_name.empty() && tensors.find(spec.gguf_negexp_name) == nullptr;
    if (!spec.gguf_negexp_name.empty() && !from_log) source = spec.gguf_negexp_name;
    const StoredTensor* tensor = tensors.find(source);
    if (tensor == nullptr) throw Error("the model has no tensor '" + source + "'");
    if (tensor->shape != spec.shape)
      throw Error("tensor '" + source + "' has shape " + tensor->shape_string() + "; GGUF needs " +
                  shape_string(spec.shape));
    std::vector<float> values = widen(*tensor);
    // llama.cpp's converter stores A = -exp(A_log); computed in double, rounded once.
    if (from_log)
      for (float& v : values) v = static_cast<float>(-std::exp(static_cast<double>(v)));
    const std::vector<int64_t> ne = gguf_dims(spec, shaped);
    const int64_t layer = spec.gguf.rfind("blk.", 0) == 0 ? std::stoll(spec.gguf.substr(4)) : 0;
    // The LM head: the untied one, or the embedding it is tied to.
    const bool head =
        spec.name == own.tail[kLmHead].name || (c.tie_embeddings && spec.name == embedding_spec.name);
    const uint32_t type = storage_type(spec, ne, options.type, layer, c.n_layer, head);
    writer.add_tensor(spec.gguf, ne, type, encode(values, type, ne[0]));
    if (options.progress != nullptr) options.progress->advance(tensor->byte_size);
  }
  if (options.progress != nullptr) options.progress->start("writing " + path, 0, ProgressUnit::Bytes);
  writer.write(path);
}

}  // namespace mb

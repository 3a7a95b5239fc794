// SPDX-License-Identifier: MIT
#include "model/gguf_checkpoint.h"

#include <algorithm>
#include <deque>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>

#include "core/error.h"
#include "model/blocks/mamba_schema.h"
#include "model/families/qwen35_gguf.h"
#include "model/family.h"
#include "model/gguf_hybrid.h"
#include "model/gguf_tensor_names.h"

namespace mb {
namespace {

using nlohmann::json;

// The names of the model's own tensors, which depend on no size (the metadata is read before
// there is a config).
ModelTensors model_tensors() {
  return model_tensor_specs(ModelConfig{}, true, 0);
}

// `ne` without its trailing unit dims. ggml writes a tensor with only its first ggml_n_dims dims
// (up to the last one that is not 1), so llama-quantize's files hold an ngroups-1 Mamba-2 norm as
// {d_inner} where the converter wrote {d_inner, 1}; llama.cpp compares dims with trailing 1s
// dropped from both sides, and so does this loader, which also accepts surplus unit dims.
std::vector<int64_t> without_trailing_ones(std::vector<int64_t> ne) {
  while (!ne.empty() && ne.back() == 1) ne.pop_back();
  return ne;
}

// Splits "blk.12.ssm_in.weight" into 12 and "ssm_in.weight"; false for other names.
bool split_layer_name(const std::string& name, int64_t& layer, std::string& suffix) {
  if (name.rfind("blk.", 0) != 0) return false;
  const size_t dot = name.find('.', 4);
  if (dot == std::string::npos || dot == 4 || dot > 4 + 6) return false;
  layer = 0;
  for (size_t i = 4; i < dot; ++i) {
    if (name[i] < '0' || name[i] > '9') return false;
    layer = layer * 10 + (name[i] - '0');
  }
  suffix = name.substr(dot + 1);
  return true;
}

// The tensor set of a file with the bytes the reader had to reorder (q and k rows), which it
// keeps alive beside the mapping.
struct HeldTensors {
  std::deque<std::vector<uint8_t>> bytes;
  TensorSet set;
};

// The embedding's rows: the one vocabulary size of a GGUF file, which the token list must match.
int64_t embedding_rows(const GgufFile& file) {
  const std::string where = "'" + file.path() + "'";
  const std::string embedding_name = model_tensors().head[kEmbedding].gguf;
  const GgufTensorInfo* embedding = file.find_tensor(embedding_name);
  if (embedding == nullptr) throw Error(where + " is missing tensor '" + embedding_name + "'");
  // A vocabulary of one row is stored as {embedding_length} (trailing unit dims are dropped).
  const std::vector<int64_t> embedding_dims = without_trailing_ones(embedding->ne);
  if (embedding_dims.size() > 2 || embedding->element_count() < 1)
    throw Error(where + ": tensor '" + embedding_name + "' has dims " + embedding->dims_string() +
                "; expected {embedding_length, vocabulary}");
  const int64_t vocab_rows = embedding_dims.size() == 2 ? embedding_dims[1] : 1;
  if (const GgufValue* tokens = file.find("tokenizer.ggml.tokens");
      tokens != nullptr && static_cast<int64_t>(tokens->size()) != vocab_rows)
    throw Error(where + ": " + embedding_name + " has " + std::to_string(vocab_rows) +
                " rows but tokenizer.ggml.tokens lists " + std::to_string(tokens->size()) + " tokens");
  return vocab_rows;
}

// The spec a file's tensor belongs to, and which half of it for SplitHalves (0 otherwise).
std::pair<const TensorSpec*, int> find_spec(const std::vector<TensorSpec>& specs, const GgufTensorInfo& info,
                                            const ModelConfig& c, const std::string& where,
                                            const std::string& arch) {
  int64_t layer = -1;
  std::string suffix;
  if (split_layer_name(info.name, layer, suffix) && layer >= c.n_layer)
    throw Error(where + ": tensor '" + info.name + "' belongs to a layer outside the " +
                std::to_string(c.n_layer) + " of block_count");
  for (const TensorSpec& spec : specs) {
    if (spec.gguf == info.name) return {&spec, 0};
    if (!spec.gguf_second.empty() && spec.gguf_second == info.name) return {&spec, 1};
  }
  std::string kind;
  // Only the hand-parsed hybrids have a pattern string (a declared family's is its own).
  if (layer >= 0 && c.family != ModelFamily::Mamba && static_cast<size_t>(layer) < c.hybrid.pattern.size()) {
    const char k = c.hybrid.pattern[static_cast<size_t>(layer)];
    kind = std::string(" (layer ") + std::to_string(layer) + " is " +
           (k == kMambaLayer           ? "a Mamba-2"
            : k == kAttentionLayer     ? "an attention"
            : k == kMoeLayer           ? "a mixture-of-experts"
            : k == kShortConvLayer     ? "a short-convolution"
            : k == kGatedDeltaNetLayer ? "a Gated DeltaNet"
                                       : "an MLP") +
           " layer by its metadata)";
  }
  throw Error(where + ": tensor '" + info.name + "' is not part of a " + arch + " model" + kind);
}

void check_dims(const TensorSpec& spec, const GgufTensorInfo& info, const ModelConfig& c,
                const std::string& where) {
  const std::vector<int64_t> expected = gguf_dims(spec, c);
  if (without_trailing_ones(info.ne) == without_trailing_ones(expected)) return;
  GgufTensorInfo want;
  want.ne = expected;
  throw Error(where + ": tensor '" + info.name + "' has dims " + info.dims_string() +
              " but the metadata implies " + want.dims_string());
}

}  // namespace

bool is_gguf_file(const std::string& path) {
  std::error_code error;
  if (!std::filesystem::is_regular_file(path, error)) return false;
  std::ifstream in(path, std::ios::binary);
  char magic[4] = {};
  in.read(magic, 4);
  return in.gcount() == 4 && std::string_view(magic, 4) == "GGUF";
}

GgufCheckpoint open_gguf_checkpoint(const std::string& path) {
  return open_gguf_checkpoint(GgufFile(path));
}

GgufCheckpoint open_gguf_checkpoint(const GgufFile& file) {
  const std::string where = "'" + file.path() + "'";
  const std::string arch = file.string_value("general.architecture");
  const Family* family = family_by_gguf_file(file, arch);
  if (family == nullptr) {
    std::string expected;
    for (const Family* f : all_families())
      for (const std::string& a : f->gguf_archs) expected += (expected.empty() ? "" : ", ") + a;
    throw Error(where + ": architecture '" + arch + "' is not supported (expected one of " + expected + ")");
  }
  const int64_t vocab_rows = embedding_rows(file);
  GgufCheckpoint checkpoint;
  checkpoint.config = parse_model_config(gguf_family_config_json(*family, file, arch, vocab_rows), where);
  // Nemotron-H's attention scale, when the file sets one (its HF config has no key for it).
  if (arch == kGgufNemotronH || arch == kGgufNemotronHMoe)
    apply_gguf_hybrid_overrides(file, arch, checkpoint.config);
  // llama.cpp's Qwen3.5 files hold their value heads in tiled order (families/qwen35_gguf.h).
  if (checkpoint.config.family == ModelFamily::Qwen35) checkpoint.config.qwen35.tiled_heads = true;
  const ModelConfig& c = checkpoint.config;
  const std::vector<TensorSpec> specs = gguf_tensor_specs(c);

  auto held = std::make_shared<HeldTensors>();
  std::vector<StoredTensor> stored;
  std::set<std::string> present;
  for (const GgufTensorInfo& info : file.tensors()) {
    // The MTP layer the converter appends as the last block serves speculative decoding, which
    // the engine does not do.
    int64_t layer = -1;
    std::string suffix;
    if (split_layer_name(info.name, layer, suffix) && qwen35_is_mtp_layer(c, layer)) continue;
    const auto [spec, half] = find_spec(specs, info, c, where, arch);
    check_dims(*spec, info, c, where);
    const std::optional<DType> dtype = gguf_engine_dtype(info.type);
    if (!dtype)
      throw Error(where + ": tensor '" + info.name + "' is stored as " + ggml_type_info(info.type)->name +
                  ", which the engine does not compute with (F32, F16, BF16, Q8_0, Q4_0, Q4_K and Q6_K are)");
    StoredTensor tensor;
    // GGUF holds A = -exp(A_log), which is bound under its own name (weight_schema.h), and each
    // half of a split matrix under its half's name.
    tensor.name = spec->gguf_negexp_name.empty() ? spec->name : spec->gguf_negexp_name;
    if (spec->zero_centred) tensor.name = gguf_plus_one_name(spec->name);  // holds 1 + w
    tensor.shape = spec->shape;
    if (spec->gguf_form == GgufForm::SplitHalves) {
      tensor.name = gguf_half_name(spec->name, half);
      tensor.shape[tensor.shape.size() >= 2 ? tensor.shape.size() - 2 : 0] /= 2;
    }
    tensor.dtype_string = ggml_type_info(info.type)->name;
    tensor.dtype = dtype;
    tensor.data = info.data;
    tensor.byte_size = info.byte_size;
    tensor.file = file.path();
    if (spec->gguf_form == GgufForm::HeadPairsInterleaved) {
      // Back to the Hugging Face order, so the dot products over a head run as the folder's do.
      const int64_t rows = spec->shape[0];
      held->bytes.push_back(reorder_head_rows(info.data, info.byte_size / static_cast<size_t>(rows), rows,
                                              c.hybrid.attention.head_dim, false));
      tensor.data = held->bytes.back().data();
    }
    present.insert(info.name);
    stored.push_back(std::move(tensor));
  }
  // Every tensor the config calls for must be there, named as llama.cpp names it.
  for (const TensorSpec& spec : specs)
    for (const std::string& name : {spec.gguf, spec.gguf_second})
      if (!name.empty() && !present.count(name)) throw Error(where + " is missing tensor '" + name + "'");
  held->set = TensorSet::from_tensors(file.mapping(), std::move(stored));
  checkpoint.tensors = std::shared_ptr<const TensorSet>(held, &held->set);
  return checkpoint;
}

}  // namespace mb

#include "model/make_model.h"
#include "model/random.h"

#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "io/mapped_file.h"
#include "io/safetensors.h"
#include "io/torch_checkpoint.h"
#include "model/generated_tensors.h"
#include "tokenizer/tokenizer.h"

namespace mb {
namespace {

struct PendingTensor {
  std::string name;
  std::vector<int64_t> shape;
  std::vector<float> values;
  bool keep_f32;  // per-channel parameters the reference code keeps in f32 (A_log, D, dt bias)
};

void add_mamba1_layers(const ModelConfig& c, SeededRandom& rng, std::vector<PendingTensor>& out) {
  const int64_t d = c.d_model, D = c.d_inner, N = c.d_state, R = c.dt_rank, K = c.d_conv;
  for (int64_t l = 0; l < c.n_layer; ++l) {
    const std::string p = "backbone.layers." + std::to_string(l) + ".";
    const std::string m = p + "mixer.";
    out.push_back({p + "norm.weight", {d}, std::vector<float>(d, 1.0f), false});
    // Projections: unit-variance outputs for unit-variance inputs (uniform, bound sqrt(3 / fan_in)).
    out.push_back(
        {m + "in_proj.weight", {2 * D, d}, rng.uniform_values(2 * D * d, std::sqrt(3.0 / d)), false});
    if (c.use_bias) out.push_back({m + "in_proj.bias", {2 * D}, rng.uniform_values(2 * D, 0.1), false});
    out.push_back(
        {m + "conv1d.weight", {D, 1, K}, rng.uniform_values(D * K, 1.0 / std::sqrt(double(K))), false});
    if (c.use_conv_bias) out.push_back({m + "conv1d.bias", {D}, rng.uniform_values(D, 0.1), false});
    out.push_back({m + "x_proj.weight",
                   {R + 2 * N, D},
                   rng.uniform_values((R + 2 * N) * D, 1.0 / std::sqrt(double(D))),
                   false});
    out.push_back(
        {m + "dt_proj.weight", {D, R}, rng.uniform_values(D * R, 1.0 / std::sqrt(double(R))), false});
    // dt bias = softplus^-1(dt) with dt log-uniform in [1e-3, 1e-1], as mamba_ssm initializes it.
    std::vector<float> dt_bias(D);
    for (float& b : dt_bias) {
      const double dt = std::exp(std::log(1e-3) + rng.uniform() * (std::log(1e-1) - std::log(1e-3)));
      b = static_cast<float>(dt + std::log(-std::expm1(-dt)));
    }
    out.push_back({m + "dt_proj.bias", {D}, dt_bias, true});
    std::vector<float> a_log(D * N);
    for (int64_t ch = 0; ch < D; ++ch)
      for (int64_t n = 0; n < N; ++n) a_log[ch * N + n] = static_cast<float>(std::log(double(n + 1)));
    out.push_back({m + "A_log", {D, N}, a_log, true});
    out.push_back({m + "D", {D}, std::vector<float>(D, 1.0f), true});
    // Residual branches are scaled by 1/sqrt(n_layer) so the stream stays O(1) with depth.
    const double out_bound = std::sqrt(3.0 / D) / std::sqrt(double(c.n_layer));
    out.push_back({m + "out_proj.weight", {d, D}, rng.uniform_values(d * D, out_bound), false});
    if (c.use_bias) out.push_back({m + "out_proj.bias", {d}, rng.uniform_values(d, 0.1), false});
  }
}

void write_shards(const std::string& dir, std::vector<PendingTensor>& tensors, DType dtype, int shards,
                  CheckpointFormat format) {
  if (format == CheckpointFormat::TorchBin) {
    TorchCheckpointWriter writer;
    for (auto& t : tensors) {
      writer.add_f32(t.name, t.shape, t.values, t.keep_f32 ? DType::F32 : dtype);
      std::vector<float>().swap(t.values);
    }
    writer.write((std::filesystem::path(dir) / "pytorch_model.bin").string());
    return;
  }
  size_t total = 0;
  for (const auto& t : tensors) total += t.values.size() * (t.keep_f32 ? 4 : dtype_size(dtype));
  if (shards <= 1) {
    SafetensorsWriter writer;
    writer.set_metadata("format", "pt");
    // Each tensor's f32 values are released once encoded, so a multi-GB model never holds two
    // full copies.
    for (auto& t : tensors) {
      writer.add_f32(t.name, t.shape, t.values, t.keep_f32 ? DType::F32 : dtype);
      std::vector<float>().swap(t.values);
    }
    writer.write((std::filesystem::path(dir) / "model.safetensors").string());
    return;
  }
  nlohmann::json weight_map = nlohmann::json::object();
  const size_t per_shard = (total + shards - 1) / shards;
  size_t index = 0;
  for (int shard = 0; shard < shards; ++shard) {
    char name[64];
    std::snprintf(name, sizeof name, "model-%05d-of-%05d.safetensors", shard + 1, shards);
    SafetensorsWriter writer;
    writer.set_metadata("format", "pt");
    // Fill each shard up to its share; the last shard takes whatever is left.
    while (index < tensors.size() && (shard == shards - 1 || writer.byte_size() < per_shard)) {
      auto& t = tensors[index++];
      writer.add_f32(t.name, t.shape, t.values, t.keep_f32 ? DType::F32 : dtype);
      std::vector<float>().swap(t.values);
      weight_map[t.name] = name;
    }
    writer.write((std::filesystem::path(dir) / name).string());
  }
  const nlohmann::json index_json = {{"metadata", {{"total_size", total}}}, {"weight_map", weight_map}};
  write_file_atomically((std::filesystem::path(dir) / "model.safetensors.index.json").string(),
                        index_json.dump(2));
}

}  // namespace

ModelConfig preset_config(const std::string& name) {
  ModelConfig c;
  if (name == "tiny") {
    c.d_model = 64;
    c.n_layer = 2;
    c.vocab_size = 512;
  } else if (name == "130m") {
    c.d_model = 768;
    c.n_layer = 24;
    c.vocab_size = 50280;
  } else if (name == "370m") {
    // mamba-370m's shape, for the GPU benchmarks' larger model.
    c.d_model = 1024;
    c.n_layer = 48;
    c.vocab_size = 50280;
  } else {
    throw Error("unknown preset '" + name + "' (expected tiny, 130m or 370m)");
  }
  c.d_state = 16;
  c.d_conv = 4;
  c.expand = 2;
  c.d_inner = c.expand * c.d_model;
  c.dt_rank = (c.d_model + 15) / 16;
  c.pad_vocab_size_multiple = 8;
  c.vocab_rows = (c.vocab_size + 7) / 8 * 8;
  return c;
}

double make_model_value_count(const ModelConfig& c, int64_t input_dim) {
  // Doubles, so that absurd sizes cannot overflow the estimate itself.
  const double d = static_cast<double>(c.d_model), inner = static_cast<double>(c.expand) * d;
  const double rows = static_cast<double>(c.vocab_size);
  const double per_layer = inner * (3 * d + 3 * static_cast<double>(c.d_state) +
                                    static_cast<double>(c.d_conv) + 2 * static_cast<double>(c.dt_rank)) +
                           d;
  return rows * d * (c.tie_embeddings ? 1 : 2) + static_cast<double>(c.n_layer) * per_layer +
         static_cast<double>(input_dim) * d;
}

void make_model(const std::string& out_dir, const MakeModelOptions& options) {
  ModelConfig c = options.config;
  // Sizes are checked here rather than replaced: a checkpoint of other sizes than the ones asked
  // for would be a silent surprise. The remaining sizes are checked by the config round trip below.
  if (c.arch == Architecture::Mamba1 && c.dt_rank < 1)
    throw Error("make_model: dt_rank must be >= 1, got " + std::to_string(c.dt_rank));
  if (c.pad_vocab_size_multiple < 1)
    throw Error("make_model: pad_vocab_size_multiple must be >= 1, got " +
                std::to_string(c.pad_vocab_size_multiple));
  if (options.shards < 1)
    throw Error("make_model: shards must be >= 1, got " + std::to_string(options.shards));
  if (dtype_is_quantized(options.dtype))
    throw Error("make_model: checkpoints are stored as f32, bf16 or f16, not " +
                std::string(dtype_name(options.dtype)) +
                " (quantize at load instead: LoadOptions::weight_dtype, the CLI's --dtype)");
  if (options.input_dim < 0)
    throw Error("make_model: input_dim must be >= 0, got " + std::to_string(options.input_dim));
  const double values = make_model_value_count(c, options.input_dim);
  if (values > static_cast<double>(kMaxMakeModelValues))
    throw Error("make_model: the sizes make about " + std::to_string(static_cast<int64_t>(values)) +
                " weight values, beyond the limit of " + std::to_string(kMaxMakeModelValues));
  c.d_inner = c.expand * c.d_model;
  c.vocab_rows =
      (c.vocab_size + c.pad_vocab_size_multiple - 1) / c.pad_vocab_size_multiple * c.pad_vocab_size_multiple;
  if (c.mixer_rms_norm && (c.arch != Architecture::Mamba1 || options.form != ConfigForm::HuggingFace))
    throw Error("FalconMamba checkpoints only exist in the Hugging Face form of Mamba-1");
  if (options.format == CheckpointFormat::TorchBin && options.shards > 1)
    throw Error("--shards > 1 is only supported with --format safetensors");
  // Round-trip the config through the parser so make-model never writes a folder the loader refuses.
  // Mamba-3 checkpoints only exist in the state-spaces layout.
  const bool hf_names = options.form == ConfigForm::HuggingFace && c.arch != Architecture::Mamba3;
  const nlohmann::json config_json = hf_names ? model_config_to_hf_json(c) : model_config_to_original_json(c);
  parse_model_config(config_json, "make-model");

  std::filesystem::create_directories(out_dir);
  SeededRandom rng(options.seed);
  std::vector<PendingTensor> tensors;
  const int64_t d = c.d_model;
  const std::string embedding_name = hf_names ? "backbone.embeddings.weight" : "backbone.embedding.weight";
  // Embedding rows with RMS 2/sqrt(d) give logits of a few units against a unit-RMS final state.
  tensors.push_back({embedding_name,
                     {c.vocab_rows, d},
                     rng.uniform_values(c.vocab_rows * d, 2.0 * std::sqrt(3.0 / d)),
                     false});
  if (options.input_dim > 0) {
    tensors.push_back({"input_proj.weight",
                       {d, options.input_dim},
                       rng.uniform_values(d * options.input_dim, std::sqrt(3.0 / options.input_dim)),
                       false});
    tensors.push_back({"input_proj.bias", {d}, rng.uniform_values(d, 0.1), false});
  }
  if (c.arch == Architecture::Mamba2 || c.arch == Architecture::Mamba3) {
    const uint64_t seed = rng.next();
    for (GeneratedTensor& t : c.arch == Architecture::Mamba2 ? make_mamba2_layer_tensors(c, seed)
                                                             : make_mamba3_layer_tensors(c, seed))
      tensors.push_back({std::move(t.name), std::move(t.shape), std::move(t.values), t.keep_f32});
  } else {
    add_mamba1_layers(c, rng, tensors);
  }
  tensors.push_back({"backbone.norm_f.weight", {d}, std::vector<float>(d, 1.0f), false});
  if (!c.tie_embeddings)
    tensors.push_back({"lm_head.weight",
                       {c.vocab_rows, d},
                       rng.uniform_values(c.vocab_rows * d, 2.0 * std::sqrt(3.0 / d)),
                       false});

  write_shards(out_dir, tensors, options.dtype, options.shards, options.format);
  // A byte-level tokenizer needs 256 byte tokens plus the end-of-text token.
  if (options.write_tokenizer && c.vocab_size >= 257)
    write_byte_level_tokenizer_json((std::filesystem::path(out_dir) / "tokenizer.json").string(),
                                    static_cast<int32_t>(c.vocab_size));
  write_file_atomically((std::filesystem::path(out_dir) / "config.json").string(), config_json.dump(2));
}

}  // namespace mb

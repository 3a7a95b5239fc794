// SPDX-License-Identifier: MIT
#include "model/make_model.h"
#include "model/random.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "io/mapped_file.h"
#include "io/safetensors.h"
#include "io/torch_checkpoint.h"
#include "model/family.h"
#include "model/weight_schema.h"
#include "tokenizer/tokenizer.h"

namespace mb {
namespace {

// One tensor of the fixture: its spec and its drawn values.
struct GeneratedTensor {
  TensorSpec spec;
  std::vector<float> values;
};

// Draws `spec`'s values as its init says (weight_schema.h).
std::vector<float> draw(const TensorSpec& spec, SeededRandom& rng) {
  size_t count = 1;
  for (int64_t extent : spec.shape) count *= static_cast<size_t>(extent);
  const TensorInit& init = spec.init;
  switch (init.kind) {
    case TensorInit::Constant:
      return std::vector<float>(count, static_cast<float>(init.value));
    case TensorInit::Uniform:
      return rng.uniform_values(count, init.value);
    case TensorInit::AroundOne: {
      std::vector<float> values = rng.uniform_values(count, init.value);
      for (float& v : values) v += 1.0f;
      return values;
    }
    case TensorInit::DtBias: {
      // softplus^-1(dt) with dt log-uniform in [1e-3, 1e-1], as mamba_ssm initializes it.
      std::vector<float> values(count);
      for (float& b : values) {
        const double dt = std::exp(std::log(1e-3) + rng.uniform() * (std::log(1e-1) - std::log(1e-3)));
        b = static_cast<float>(dt + std::log(-std::expm1(-dt)));
      }
      return values;
    }
    case TensorInit::LogStateIndex: {
      const int64_t channels = spec.shape[0], states = spec.shape[1];
      std::vector<float> values(count);
      for (int64_t ch = 0; ch < channels; ++ch)
        for (int64_t n = 0; n < states; ++n)
          values[ch * states + n] = static_cast<float>(std::log(double(n + 1)));
      return values;
    }
    case TensorInit::LogUniformA: {
      std::vector<float> values(count);
      for (float& a : values) a = static_cast<float>(std::log(1.0 + 15.0 * rng.uniform()));
      return values;
    }
  }
  return {};
}

// Every wanted tensor of `specs`, drawn from `rng` in order; `progress` (may be null) counts their
// f32 bytes. Experts stored one tensor per expert are drawn as their stacked tensor, then written
// as each expert's slice.
void generate(const std::vector<TensorSpec>& specs, SeededRandom& rng, std::vector<GeneratedTensor>& out,
              ProgressLine* progress) {
  for (const TensorSpec& spec : specs) {
    if (!spec.wanted) continue;
    std::vector<float> values = draw(spec, rng);
    if (progress != nullptr) progress->advance(values.size() * sizeof(float));
    if (spec.role != TensorRole::Experts || spec.expert_name.empty()) {
      out.push_back({spec, std::move(values)});
      continue;
    }
    const int64_t experts = spec.shape[0], rows = spec.shape[1], cols = spec.shape[2];
    // Each expert's slice, or its two halves of rows under two names (expert_second_name).
    const bool halves = !spec.expert_second_name.empty();
    const int64_t part_rows = halves ? rows / 2 : rows;
    for (int64_t e = 0; e < experts; ++e) {
      for (int64_t part = 0; part < (halves ? 2 : 1); ++part) {
        TensorSpec one = spec;
        one.name = expert_tensor_name(part == 0 ? spec.expert_name : spec.expert_second_name, e);
        one.shape = {part_rows, cols};
        one.role = TensorRole::Matrix;
        const auto first = values.begin() + (e * rows + part * part_rows) * cols;
        out.push_back({std::move(one), std::vector<float>(first, first + part_rows * cols)});
      }
    }
  }
}

// The f32 bytes of every wanted tensor of `lists`.
uint64_t wanted_bytes(std::initializer_list<const std::vector<TensorSpec>*> lists) {
  uint64_t bytes = 0;
  for (const std::vector<TensorSpec>* specs : lists) {
    for (const TensorSpec& spec : *specs) {
      if (!spec.wanted) continue;
      uint64_t count = sizeof(float);
      for (int64_t extent : spec.shape) count *= static_cast<uint64_t>(extent);
      bytes += count;
    }
  }
  return bytes;
}

// Writes the weights into `dir`; returns the names of the files written.
std::vector<std::string> write_shards(const std::string& dir, std::vector<GeneratedTensor>& tensors,
                                      DType dtype, int shards, CheckpointFormat format) {
  if (format == CheckpointFormat::TorchBin) {
    TorchCheckpointWriter writer;
    for (auto& t : tensors) {
      writer.add_f32(t.spec.name, t.spec.shape, t.values, t.spec.keep_f32 ? DType::F32 : dtype);
      std::vector<float>().swap(t.values);
    }
    writer.write((std::filesystem::path(dir) / "pytorch_model.bin").string());
    return {"pytorch_model.bin"};
  }
  size_t total = 0;
  for (const auto& t : tensors) total += t.values.size() * (t.spec.keep_f32 ? 4 : dtype_size(dtype));
  if (shards <= 1) {
    SafetensorsWriter writer;
    writer.set_metadata("format", "pt");
    // Each tensor's f32 values are released once encoded, so a multi-GB model never holds two
    // full copies.
    for (auto& t : tensors) {
      writer.add_f32(t.spec.name, t.spec.shape, t.values, t.spec.keep_f32 ? DType::F32 : dtype);
      std::vector<float>().swap(t.values);
    }
    writer.write((std::filesystem::path(dir) / "model.safetensors").string());
    return {"model.safetensors"};
  }
  std::vector<std::string> written;
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
      writer.add_f32(t.spec.name, t.spec.shape, t.values, t.spec.keep_f32 ? DType::F32 : dtype);
      std::vector<float>().swap(t.values);
      weight_map[t.spec.name] = name;
    }
    writer.write((std::filesystem::path(dir) / name).string());
    written.push_back(name);
  }
  const nlohmann::json index_json = {{"metadata", {{"total_size", total}}}, {"weight_map", weight_map}};
  write_file_atomically((std::filesystem::path(dir) / "model.safetensors.index.json").string(),
                        index_json.dump(2));
  written.push_back("model.safetensors.index.json");
  return written;
}

// Whether `name` is a weight file a loader would read or an index would name: model.safetensors,
// pytorch_model.bin, their indexes, and shards such as model-00001-of-00003.safetensors.
bool is_weight_file(const std::string& name) {
  if (name == "model.safetensors" || name == "model.safetensors.index.json" || name == "pytorch_model.bin" ||
      name == "pytorch_model.bin.index.json")
    return true;
  const auto shard = [&](const std::string& prefix, const std::string& suffix) {
    return name.size() > prefix.size() + suffix.size() && name.starts_with(prefix) &&
           name.ends_with(suffix) && name.find("-of-") != std::string::npos;
  };
  return shard("model-", ".safetensors") || shard("pytorch_model-", ".bin");
}

// Removes the weight files of a previous checkpoint in `dir` that the new one did not write:
// left in place, an old model.safetensors would be loaded instead of a new index (or an old
// shard would sit beside new ones), and the folder would not hold the model just written.
void remove_stale_weights(const std::string& dir, const std::vector<std::string>& written) {
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    const std::string name = entry.path().filename().string();
    if (!is_weight_file(name) || std::find(written.begin(), written.end(), name) != written.end()) continue;
    std::error_code error;
    std::filesystem::remove(entry.path(), error);
    if (error)
      throw Error("cannot remove the stale weight file '" + entry.path().string() + "': " + error.message());
  }
}

// tokenizer_config.json with the chat template, as Hugging Face checkpoints carry it. The bos and eos
// texts are the byte-level tokenizer's one special token (its end of text), so a template that
// prints them renders text the tokenizer reads back as that token; without the tokenizer, none.
void write_tokenizer_config(const std::string& out_dir, const MakeModelOptions& options) {
  nlohmann::json config = nlohmann::json::object();
  if (options.write_tokenizer && options.config.vocab_size >= 257) {
    config["bos_token"] = "<|endoftext|>";
    config["eos_token"] = "<|endoftext|>";
  }
  config["chat_template"] = options.chat_template;
  write_file_atomically((std::filesystem::path(out_dir) / "tokenizer_config.json").string(), config.dump(2));
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
  c.ssm.d_state = 16;
  c.ssm.d_conv = 4;
  c.ssm.expand = 2;
  c.ssm.d_inner = c.ssm.expand * c.d_model;
  c.ssm.dt_rank = (c.d_model + 15) / 16;
  c.pad_vocab_size_multiple = 8;
  c.vocab_rows = (c.vocab_size + 7) / 8 * 8;
  return c;
}

ModelConfig set_config_keys(const Family& family, nlohmann::json config,
                            const std::vector<std::string>& assignments, const std::string& where) {
  for (const std::string& assignment : assignments) {
    const size_t equals = assignment.find('=');
    if (equals == std::string::npos || equals == 0)
      throw Error("--set " + assignment + ": expected KEY=VALUE (VALUE in JSON: 4, 1e-6, true, \"rope\")");
    const std::string key = assignment.substr(0, equals), text = assignment.substr(equals + 1);
    const ConfigKey* declared = nullptr;
    for (const ConfigKey& k : family.keys)
      if (k.hf == key || std::find(k.aliases.begin(), k.aliases.end(), key) != k.aliases.end()) declared = &k;
    // Mamba-3's state-spaces form keeps its mixer keys in ssm_cfg (read together with the rest).
    const bool nested = config.contains("ssm_cfg") && !config.contains(key);
    if (declared == nullptr && !config.contains(key) && !(nested && config["ssm_cfg"].contains(key)))
      throw Error("--set " + key + ": not a config key of " + family.name);
    // Not JSON: the text itself, as a string (the key's type check then names it).
    nlohmann::json value = nlohmann::json::parse(text, nullptr, false);
    if (value.is_discarded()) value = text;
    nlohmann::json& target =
        nested && declared != nullptr && family.model_types.empty() ? config["ssm_cfg"] : config;
    // The key's other spellings are dropped, so that the value set is the one read.
    if (declared != nullptr)
      for (const std::string& alias : declared->aliases) target.erase(alias);
    target[declared != nullptr ? declared->hf : key] = std::move(value);
  }
  return parse_model_config(config, where);
}

ModelConfig set_config_keys(const ModelConfig& config, const std::vector<std::string>& assignments) {
  if (assignments.empty()) return config;
  const Family* family = find_family(config);
  if (family == nullptr) throw Error("--set: the config belongs to no declared family");
  // Mamba-3 has only the state-spaces form.
  const bool original = family->model_types.empty();
  return set_config_keys(*family,
                         original ? model_config_to_original_json(config) : model_config_to_hf_json(config),
                         assignments, "make-model --set");
}

double make_model_value_count(const ModelConfig& c, int64_t input_dim) {
  // Doubles, so that absurd sizes cannot overflow the estimate itself.
  const double d = static_cast<double>(c.d_model), inner = static_cast<double>(c.ssm.expand) * d;
  const double rows = static_cast<double>(c.vocab_size);
  const double per_layer =
      inner * (3 * d + 3 * static_cast<double>(c.ssm.d_state) + static_cast<double>(c.ssm.d_conv) +
               2 * static_cast<double>(c.ssm.dt_rank)) +
      d;
  // A mixture of experts' layers hold E experts of up to three width x d matrices each.
  const double experts =
      static_cast<double>(c.hybrid.moe.n_experts) * 3 * static_cast<double>(c.hybrid.moe.width) * d;
  return rows * d * (c.tie_embeddings ? 1 : 2) + static_cast<double>(c.n_layer) * (per_layer + experts) +
         static_cast<double>(input_dim) * d;
}

void make_model(const std::string& out_dir, const MakeModelOptions& options) {
  ModelConfig c = options.config;
  // Sizes are checked here rather than replaced: a checkpoint of other sizes than the ones asked
  // for would be a silent surprise. The remaining sizes are checked by the config round trip below.
  if (c.arch == Architecture::Mamba1 && c.ssm.dt_rank < 1)
    throw Error("make_model: dt_rank must be >= 1, got " + std::to_string(c.ssm.dt_rank));
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
  // Nemotron-H's mixers are mamba_num_heads x mamba_head_dim wide, whatever expand says.
  if (c.family == ModelFamily::Mamba || c.ssm.d_inner == 0) c.ssm.d_inner = c.ssm.expand * c.d_model;
  c.vocab_rows =
      (c.vocab_size + c.pad_vocab_size_multiple - 1) / c.pad_vocab_size_multiple * c.pad_vocab_size_multiple;
  if (c.ssm.mixer_rms_norm && (c.arch != Architecture::Mamba1 || options.form != ConfigForm::HuggingFace))
    throw Error("FalconMamba checkpoints only exist in the Hugging Face form of Mamba-1");
  if (options.format == CheckpointFormat::TorchBin && options.shards > 1)
    throw Error("--shards > 1 is only supported with --format safetensors");
  // Round-trip the config through the parser so make-model never writes a folder the loader refuses.
  // Mamba-3 checkpoints only exist in the state-spaces layout.
  const bool hf_names = options.form == ConfigForm::HuggingFace && c.arch != Architecture::Mamba3;
  const nlohmann::json config_json = hf_names ? model_config_to_hf_json(c) : model_config_to_original_json(c);
  parse_model_config(config_json, "make-model");

  std::filesystem::create_directories(out_dir);
  // The schema's order from one generator, except that the Mamba-2 and Mamba-3 layers draw from a
  // generator of their own, seeded by one draw of the first (as fixtures were always made, so
  // their values, and the bits tests pin for them, stay the same).
  SeededRandom rng(options.seed);
  std::vector<GeneratedTensor> tensors;
  const ModelTensors own = model_tensor_specs(c, hf_names, options.input_dim);
  std::vector<TensorSpec> layers;
  for (const BlockSpec& block : c.blocks())
    for (TensorSpec& spec : block_tensor_specs(c, block)) layers.push_back(std::move(spec));
  ProgressLine* progress = options.progress;
  if (progress != nullptr)
    progress->start("drawing", wanted_bytes({&own.head, &layers, &own.tail}), ProgressUnit::Bytes);
  generate(own.head, rng, tensors, progress);
  if (c.arch == Architecture::Mamba1) {
    generate(layers, rng, tensors, progress);
  } else {
    SeededRandom layer_rng(rng.next());
    generate(layers, layer_rng, tensors, progress);
  }
  generate(own.tail, rng, tensors, progress);

  if (progress != nullptr) progress->start("writing " + out_dir, 0, ProgressUnit::Bytes);
  remove_stale_weights(out_dir,
                       write_shards(out_dir, tensors, options.dtype, options.shards, options.format));
  // A byte-level tokenizer needs 256 byte tokens plus the end-of-text token.
  if (options.write_tokenizer && c.vocab_size >= 257)
    write_byte_level_tokenizer_json((std::filesystem::path(out_dir) / "tokenizer.json").string(),
                                    static_cast<int32_t>(c.vocab_size));
  if (!options.chat_template.empty()) write_tokenizer_config(out_dir, options);
  write_file_atomically((std::filesystem::path(out_dir) / "config.json").string(), config_json.dump(2));
}

}  // namespace mb

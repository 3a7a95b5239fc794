// SPDX-License-Identifier: MIT
// Writes a random-weight checkpoint folder in the real Hugging Face layout (config.json plus
// model.safetensors, or shards with model.safetensors.index.json, or the pytorch_model.bin the
// state-spaces repos ship). It is the fixture for the tests, the benchmarks and the README
// demo, since no real weights can be downloaded here.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/progress.h"
#include "model/config.h"
#include "model/family.h"

namespace mb {

enum class ConfigForm { HuggingFace, Original };

// Safetensors (model.safetensors) or torch.save's pytorch_model.bin, as the state-spaces repos ship.
enum class CheckpointFormat { Safetensors, TorchBin };

struct MakeModelOptions {
  ModelConfig config;
  DType dtype = DType::F32;
  uint64_t seed = 0;
  int shards = 1;
  int64_t input_dim = 0;  // > 0 adds input_proj.weight [d_model, input_dim] and input_proj.bias
  ConfigForm form = ConfigForm::HuggingFace;
  bool write_tokenizer = true;  // a small byte-level tokenizer.json (when vocab >= 257)
  CheckpointFormat format = CheckpointFormat::Safetensors;  // TorchBin needs shards == 1
  // When not empty, written as tokenizer_config.json's "chat_template" (with the byte-level
  // tokenizer's <|endoftext|> as bos_token and eos_token), so `serve` and `chat` render with it.
  std::string chat_template;
  ProgressLine* progress = nullptr;  // when set, told how far drawing and writing are
};

// Preset configs: "tiny" (d_model 64, 2 layers, vocab 512), "130m" and "370m" (the shapes of
// mamba-130m and mamba-370m).
ModelConfig preset_config(const std::string& name);

// make-model's --set KEY=VALUE: `config` with each assignment's key (a declared key of its family,
// family.h, by its Hugging Face name or an alias) set to VALUE (JSON: 4, 1e-6, true, "rope"), read
// back through parse_model_config so every check applies. An undeclared key, a value that is not
// JSON or one the key refuses is an error naming the key.
ModelConfig set_config_keys(const ModelConfig& config, const std::vector<std::string>& assignments);
// The same over a family's config.json form `config` (make-model --arch's example of a family the
// size flags do not describe); `where` prefixes parse_model_config's messages.
ModelConfig set_config_keys(const Family& family, nlohmann::json config,
                            const std::vector<std::string>& assignments, const std::string& where);

// make_model holds every weight as f32 in memory before writing, so it refuses configurations of
// more than this many values (16 GiB of f32).
inline constexpr int64_t kMaxMakeModelValues = int64_t{1} << 32;

// About how many weight values `config` (plus an input projection of `input_dim` features)
// has: the embedding, the LM head when untied, and every layer's projections and parameters.
double make_model_value_count(const ModelConfig& config, int64_t input_dim);

// Throws mb::Error when the folder cannot be written or the options are inconsistent or out of
// range (a Mamba-1 dt_rank or a pad_vocab_size_multiple below 1, more than kMaxMakeModelValues
// values); sizes are never silently replaced.
void make_model(const std::string& out_dir, const MakeModelOptions& options);

}  // namespace mb

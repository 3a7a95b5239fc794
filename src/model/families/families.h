// SPDX-License-Identifier: MIT
// The checkpoint families' declarations (family.h), one file each in src/model/families/.
#pragma once

#include <limits>

#include "model/family.h"

namespace mb {

// The lower bound of a Number key that must be positive (the bounds are inclusive).
inline constexpr double kMinPositive = std::numeric_limits<double>::min();

// Builds a ConfigKey (aggregate initialization would have to name every member):
//   Key("hidden_size", [](ModelConfig& c) -> KeyField { return &c.d_model; }).gguf("embedding_length")
// is a required Int in [1, 2^20] of effect Math; the setters change what they name.
class Key {
 public:
  Key(std::string hf, std::function<KeyField(ModelConfig&)> field) {
    key_.hf = std::move(hf);
    key_.field = std::move(field);
  }
  Key& alias(std::string name) {
    key_.aliases.push_back(std::move(name));
    return *this;
  }
  Key& gguf(std::string name) {
    key_.gguf = std::move(name);
    return *this;
  }
  Key& type(KeyType type) {
    key_.type = type;
    return *this;
  }
  Key& fallback(KeyValue value) {
    key_.fallback = std::move(value);
    return *this;
  }
  Key& range(double min, double max) {
    key_.min = min;
    key_.max = max;
    return *this;
  }
  Key& max(double max) {
    key_.max = max;
    return *this;
  }
  Key& effect(KeyEffect effect) {
    key_.effect = effect;
    return *this;
  }
  operator ConfigKey() const { return key_; }  // NOLINT: a builder converts implicitly

 private:
  ConfigKey key_;
};

// The pure Mamba families (mamba.cc; the state-spaces form is mamba_original.cc).
const Family& mamba1_family();
const Family& falcon_mamba_family();
const Family& mamba2_family();
const Family& mamba3_family();
// The state-spaces form (mamba_original.cc): parsed into and written from `config`.
void parse_original_config(const nlohmann::json& object, const std::string& where, ModelConfig& config);
nlohmann::json original_config_json(const ModelConfig& config);
// The hybrids.
const Family& granite_hybrid_family();
const Family& nemotron_h_family();
// What llama.cpp's hybrid GGUF architectures cannot hold (granite_hybrid.cc).
void check_hybrid_gguf(const ModelConfig& config);

// time_step_limit (HF) or dt_limit (state-spaces), when the config has it: [min, max] with
// 0 <= min <= max (either may be Infinity), into config.dt_limit_min and dt_limit_max (mamba.cc).
void parse_dt_limit(const ConfigReader& reader, const char* key, MambaMixerConfig& config);

}  // namespace mb

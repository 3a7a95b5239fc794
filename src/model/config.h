// Model configuration, read from a checkpoint folder's config.json.
//
// Two forms are accepted for Mamba-1: the Hugging Face form (`model_type: "mamba"`,
// hidden_size, num_hidden_layers, state_size, ...) and the original state-spaces form (d_model,
// n_layer, ssm_cfg, ...). Every value is read from the file; the only defaults applied are the
// ones the original code applies itself. Mamba-2 (HF `model_type: "mamba2"`, or the state-spaces
// form with ssm_cfg.layer = "Mamba2"), Mamba-3 (the state-spaces form with ssm_cfg.layer =
// "Mamba3") and FalconMamba (`model_type: "falcon_mamba"`, which is Mamba-1 with a weightless
// RMSNorm on x_proj's three outputs) are parsed here too.
#pragma once

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace mb {

enum class Architecture { Mamba1, Mamba2, Mamba3 };

struct ModelConfig {
  Architecture arch = Architecture::Mamba1;
  int64_t d_model = 0;
  int64_t n_layer = 0;
  int64_t vocab_size = 0;         // tokens the model can produce (logits width)
  int64_t vocab_rows = 0;         // rows of the embedding: vocab_size padded to pad_vocab_size_multiple
  int64_t pad_vocab_size_multiple = 1;
  int64_t d_state = 16;
  int64_t d_conv = 4;
  int64_t expand = 2;
  int64_t d_inner = 0;            // expand * d_model
  int64_t dt_rank = 0;            // ceil(d_model / 16) when "auto"
  bool use_bias = false;          // in_proj / out_proj biases
  bool use_conv_bias = true;
  float norm_eps = 1e-5f;
  bool tie_embeddings = true;
  // Bias presence is read from the checkpoint when config.json does not say (see the model
  // constructors in mamba1.cc and mamba2.cc).
  bool use_bias_from_checkpoint = false;
  bool use_conv_bias_from_checkpoint = false;
  std::vector<int32_t> eos_token_ids;  // from "eos_token_id" (a number or a list); may be empty

  // FalconMamba: dt_low, B and C are each RMS-normalized (no weight) before use.
  bool mixer_rms_norm = false;
  double mixer_rms_eps = 1e-6;

  // Mamba-2 and Mamba-3 SISO (spec §1): heads of headdim channels, B and C in ngroups groups.
  int64_t headdim = 64;
  int64_t ngroups = 1;
  int64_t chunk_size = 64;  // SSD chunk length of the chunked scan

  // Mamba-2 only.
  double dt_limit_min = 0.0;       // time_step_limit / dt_limit: dt is clamped to [min, max]
  double dt_limit_max = INFINITY;
  bool gated_norm = true;          // RMSNormGated before out_proj (mamba_ssm `rmsnorm`); else y * silu(z)

  // Mamba-3 only.
  double rope_fraction = 0.5;
  double a_floor = 1e-4;
  bool is_outproj_norm = false;

  int64_t n_heads() const { return d_inner / headdim; }
};

// Parses and validates; throws mb::Error naming the key and the problem.
ModelConfig parse_model_config(const nlohmann::json& json, const std::string& source);
ModelConfig load_model_config(const std::string& dir);

// The HF form of `config`, as `make-model` writes it.
nlohmann::json model_config_to_hf_json(const ModelConfig& config);
// The original state-spaces form.
nlohmann::json model_config_to_original_json(const ModelConfig& config);

}  // namespace mb

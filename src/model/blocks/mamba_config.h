// SPDX-License-Identifier: MIT
// The config section of the Mamba mixer blocks (Mamba-1 with FalconMamba's mixer norm, Mamba-2 and
// Mamba-3 SISO). Each mixer block reads the fields of its own version; each checkpoint family
// (model/families/) fills them from its own keys, a hybrid's Mamba layers included.
#pragma once

#include <cmath>
#include <cstdint>
#include <string>

#include "model/architecture.h"

namespace mb {

struct MambaMixerConfig {
  int64_t d_state = 16;
  int64_t d_conv = 4;
  int64_t expand = 2;
  int64_t d_inner = 0;    // expand * d_model
  int64_t dt_rank = 0;    // Mamba-1: ceil(d_model / 16) when "auto"
  bool use_bias = false;  // in_proj / out_proj biases
  bool use_conv_bias = true;
  // Bias presence is read from the checkpoint when config.json does not say (see the Mamba-1 and
  // Mamba-2 blocks).
  bool use_bias_from_checkpoint = false;
  bool use_conv_bias_from_checkpoint = false;

  // FalconMamba: dt_low, B and C are each RMS-normalized (no weight) before use.
  bool mixer_rms_norm = false;
  double mixer_rms_eps = 1e-6;
  // Jamba: the same norms with learned weights (dt_layernorm, b_layernorm, c_layernorm).
  bool mixer_norm_weights = false;

  // Mamba-2 and Mamba-3 SISO (spec §1): heads of headdim channels, B and C in ngroups groups.
  int64_t headdim = 64;
  int64_t ngroups = 1;
  int64_t chunk_size = 64;  // SSD chunk length of the chunked scan

  // Mamba-2 only.
  double dt_limit_min = 0.0;  // time_step_limit / dt_limit: dt is clamped to [min, max]
  double dt_limit_max = INFINITY;
  bool gated_norm = true;  // RMSNormGated before out_proj (mamba_ssm `rmsnorm`); else y * silu(z)

  // Mamba-3 only.
  double rope_fraction = 0.5;
  double a_floor = 1e-4;
  bool is_outproj_norm = false;

  int64_t n_heads() const { return d_inner / headdim; }
};

// Throws mb::Error (prefixed by `where`) for sizes the mixer of `arch` cannot run.
void validate_mamba_mixer(const MambaMixerConfig& config, Architecture arch, int64_t d_model,
                          const std::string& where);

}  // namespace mb

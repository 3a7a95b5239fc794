// SPDX-License-Identifier: MIT
#include "model/blocks/mamba_config.h"

#include <string>

#include "core/error.h"

namespace mb {

void validate_mamba_mixer(const MambaMixerConfig& config, Architecture arch, int64_t d_model,
                          const std::string& where) {
  auto fail = [&](const std::string& message) { throw Error(where + ": " + message); };
  if (arch == Architecture::Mamba1) {
    if (config.d_inner != config.expand * d_model)
      fail("intermediate_size " + std::to_string(config.d_inner) +
           " != expand x hidden_size = " + std::to_string(config.expand * d_model));
    if (config.d_state > 256)
      fail("state_size " + std::to_string(config.d_state) + " exceeds the supported 256");
    if (config.d_conv > 16)
      fail("conv_kernel " + std::to_string(config.d_conv) + " exceeds the supported 16");
  } else if (arch == Architecture::Mamba2) {
    if (config.d_inner % config.headdim != 0)
      fail("d_inner " + std::to_string(config.d_inner) + " is not a multiple of the head size " +
           std::to_string(config.headdim));
    if (config.n_heads() % config.ngroups != 0)
      fail("the head count " + std::to_string(config.n_heads()) + " is not a multiple of the group count " +
           std::to_string(config.ngroups));
    if (config.d_state > 256)
      fail("state size " + std::to_string(config.d_state) + " exceeds the supported 256");
    if (config.d_conv > 16)
      fail("conv kernel " + std::to_string(config.d_conv) + " exceeds the supported 16");
  } else {
    if (config.d_inner % config.headdim != 0)
      fail("d_inner " + std::to_string(config.d_inner) + " is not a multiple of headdim " +
           std::to_string(config.headdim));
    if (config.n_heads() % config.ngroups != 0)
      fail("the head count " + std::to_string(config.n_heads()) + " is not a multiple of ngroups " +
           std::to_string(config.ngroups));
    if (config.d_state > 256)
      fail("d_state " + std::to_string(config.d_state) + " exceeds the supported 256");
    // RoPE rotates the first 2 * floor(floor(d_state * rope_fraction) / 2) state dims, so any
    // d_state works; mamba_ssm only defines the two fractions.
    if (config.rope_fraction != 0.5 && config.rope_fraction != 1.0)
      fail("ssm_cfg.rope_fraction must be 0.5 or 1.0, got " + std::to_string(config.rope_fraction));
    if (!std::isfinite(config.a_floor)) fail("ssm_cfg.A_floor must be a finite positive number");
  }
  if (config.mixer_rms_norm && !(config.mixer_rms_eps < 1.0))
    fail("'mixer_rms_eps' must be a positive number below 1");
}

}  // namespace mb

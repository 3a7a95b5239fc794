// SPDX-License-Identifier: MIT
// Fuzzes config.json through load_model_config, so that the Python-infinity pre-processing,
// the bounded JSON parse and every key reader of both config forms run on the fuzzer's bytes.
// A config that loads must also survive a round trip through the state-spaces form that
// make-model writes (model_config_to_original_json) with the same shapes.
#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>

#include "fuzz_support.h"
#include "model/config.h"

namespace {

void expect_round_trip(const mb::ModelConfig& config) {
  // FalconMamba's mixer norm exists in the Hugging Face form only.
  if (config.ssm.mixer_rms_norm) return;
  const mb::ModelConfig again =
      mb::parse_model_config(mb::model_config_to_original_json(config), "round trip");
  const bool same = again.arch == config.arch && again.d_model == config.d_model &&
                    again.n_layer == config.n_layer && again.vocab_size == config.vocab_size &&
                    again.vocab_rows == config.vocab_rows && again.ssm.d_state == config.ssm.d_state &&
                    again.ssm.d_inner == config.ssm.d_inner && again.ssm.headdim == config.ssm.headdim &&
                    again.ssm.ngroups == config.ssm.ngroups &&
                    again.ssm.chunk_size == config.ssm.chunk_size &&
                    (config.arch == mb::Architecture::Mamba3 ||
                     (again.ssm.d_conv == config.ssm.d_conv && again.ssm.dt_rank == config.ssm.dt_rank));
  if (!same) {
    std::fprintf(stderr, "the config changed in a round trip through model_config_to_original_json\n");
    std::abort();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  mb::fuzz::write_scratch_file("config.json", {data, size});
  mb::fuzz::expect_clean_refusal([&] {
    const mb::ModelConfig config = mb::load_model_config(mb::fuzz::scratch_dir());
    try {
      expect_round_trip(config);
    } catch (const mb::Error& e) {
      std::fprintf(stderr, "a loaded config fails its round trip: %s\n", e.what());
      std::abort();
    }
  });
  return 0;
}

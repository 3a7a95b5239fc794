// SPDX-License-Identifier: MIT
// Sampling and state flags shared by `generate`, `run` and `chat`.
#pragma once

#include <CLI/CLI.hpp>
#include <memory>
#include <string>
#include <vector>

#include "engine/sampler.h"

namespace mb::cli {

struct SamplingFlags {
  SamplingParams params;
  int64_t seed = -1;  // -1 = random, printed on stderr
  std::vector<std::string> stops;
  std::string state_in, state_out;
  bool ignore_eos = false;
};

// state_flags: also --state-in and --state-out (`chat` keeps its state in the conversation).
void add_sampling_flags(CLI::App& cmd, SamplingFlags& flags, bool state_flags = true);
// Resolves the seed (random when -1) and validates; returns the parameters to use.
SamplingParams resolve_sampling(const SamplingFlags& flags);

}  // namespace mb::cli

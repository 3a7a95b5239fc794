// SPDX-License-Identifier: MIT
// Log-probabilities of generated tokens for the serving API: the chosen token's and the most
// likely candidates', from the sampler's final distribution or from the model's raw logits.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "engine/sampler.h"

namespace mb {

struct TokenProbability {
  int32_t token;
  float logprob;
};

// The log-probability of `token` and the `n_probs` most likely
// candidates (most likely first, ties by lower id), either from the sampler's last distribution
// (post_sampling) or from the softmax of `logits` over ids [0, n_valid_vocab).
struct TokenLogprobs {
  float logprob = 0;
  std::vector<TokenProbability> top;
};
TokenLogprobs token_logprobs(const Sampler& sampler, std::span<const float> logits, int32_t token,
                             int n_probs, bool post_sampling);

}  // namespace mb

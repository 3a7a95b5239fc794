// SPDX-License-Identifier: MIT
#include "engine/token_logprobs.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace mb {

TokenLogprobs token_logprobs(const Sampler& sampler, std::span<const float> logits, int32_t token,
                             int n_probs, bool post_sampling) {
  TokenLogprobs result;
  if (post_sampling) {
    std::vector<SampleCandidate> candidates(sampler.last_distribution().begin(),
                                            sampler.last_distribution().end());
    result.logprob = -std::numeric_limits<float>::infinity();
    for (const SampleCandidate& c : candidates)
      if (c.id == token) result.logprob = static_cast<float>(std::log(c.probability));
    const size_t n = std::min(candidates.size(), static_cast<size_t>(std::max(n_probs, 0)));
    std::partial_sort(candidates.begin(), candidates.begin() + static_cast<ptrdiff_t>(n), candidates.end(),
                      [](const SampleCandidate& a, const SampleCandidate& b) {
                        return a.probability != b.probability ? a.probability > b.probability : a.id < b.id;
                      });
    for (size_t i = 0; i < n; ++i)
      result.top.push_back({candidates[i].id, static_cast<float>(std::log(candidates[i].probability))});
    return result;
  }

  // log-softmax of the raw logits in double precision, summed in id order. NaN counts as -inf,
  // as in the sampler; with an infinite maximum the mass goes evenly to the tokens at it (the
  // limit of the softmax), which also avoids inf - inf.
  constexpr double kNegativeInfinity = -std::numeric_limits<double>::infinity();
  const size_t vocab = static_cast<size_t>(sampler.n_valid_vocab());
  auto logit_of = [&](size_t id) {
    const float value = logits[id];
    return std::isnan(value) ? kNegativeInfinity : static_cast<double>(value);
  };
  double max_logit = kNegativeInfinity;
  for (size_t id = 0; id < vocab; ++id) max_logit = std::max(max_logit, logit_of(id));
  const bool finite_max = std::isfinite(max_logit);
  double log_normalizer = 0.0;  // log of the sum of exp(logit - max_logit), or of the tokens at the maximum
  if (finite_max) {
    double sum = 0.0;
    for (size_t id = 0; id < vocab; ++id) sum += std::exp(logit_of(id) - max_logit);
    log_normalizer = std::log(sum);
  } else {
    size_t at_max = 0;
    for (size_t id = 0; id < vocab; ++id) at_max += logit_of(id) == max_logit;
    log_normalizer = std::log(static_cast<double>(at_max));
  }
  auto logprob_of = [&](size_t id) {
    const double logit = logit_of(id);
    if (finite_max) return (logit - max_logit) - log_normalizer;
    return logit == max_logit ? -log_normalizer : kNegativeInfinity;
  };
  result.logprob = static_cast<float>(logprob_of(static_cast<size_t>(token)));
  const size_t n = std::min(vocab, static_cast<size_t>(std::max(n_probs, 0)));
  if (n > 0) {
    std::vector<int32_t> ids(vocab);
    for (size_t id = 0; id < vocab; ++id) ids[id] = static_cast<int32_t>(id);
    std::partial_sort(
        ids.begin(), ids.begin() + static_cast<ptrdiff_t>(n), ids.end(), [&](int32_t a, int32_t b) {
          const double la = logit_of(static_cast<size_t>(a)), lb = logit_of(static_cast<size_t>(b));
          return la != lb ? la > lb : a < b;
        });
    for (size_t i = 0; i < n; ++i)
      result.top.push_back({ids[i], static_cast<float>(logprob_of(static_cast<size_t>(ids[i])))});
  }
  return result;
}

}  // namespace mb

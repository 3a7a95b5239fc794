// SPDX-License-Identifier: MIT
#include "engine/sampler.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <sstream>
#include <string>

#include "core/error.h"

namespace mb {
namespace {

constexpr float kNegativeInfinity = -std::numeric_limits<float>::infinity();
constexpr float kPositiveInfinity = std::numeric_limits<float>::infinity();

template <typename T>
std::string describe(T value) {
  std::ostringstream text;
  text << value;
  return text.str();
}

// The total order every sorting step uses: larger logit first, then lower id. Making ties
// explicit keeps top-k and top-p independent of how the standard library breaks them.
bool ranks_before(const SampleCandidate& a, const SampleCandidate& b) {
  if (a.logit != b.logit) return a.logit > b.logit;
  return a.id < b.id;
}

// The top 53 bits of one engine output scaled by 2^-53: every double in [0, 1) that is a
// multiple of 2^-53 is equally likely, and the mapping is the same in every standard library.
double uniform_from_bits(uint64_t bits) {
  return static_cast<double>(bits >> 11) * 0x1.0p-53;
}

}  // namespace

std::optional<SamplingProblem> find_sampling_problem(const SamplingParams& p) {
  if (!std::isfinite(p.temperature) || p.temperature < 0.0f)
    return SamplingProblem{SamplingField::Temperature, "finite and >= 0", describe(p.temperature)};
  if (p.top_k < 0) return SamplingProblem{SamplingField::TopK, ">= 0 (0 disables it)", describe(p.top_k)};
  if (!std::isfinite(p.top_p) || p.top_p <= 0.0f || p.top_p > 1.0f)
    return SamplingProblem{SamplingField::TopP, "in (0, 1] (1 disables it)", describe(p.top_p)};
  if (!std::isfinite(p.min_p) || p.min_p < 0.0f || p.min_p > 1.0f)
    return SamplingProblem{SamplingField::MinP, "in [0, 1] (0 disables it)", describe(p.min_p)};
  if (!std::isfinite(p.repeat_penalty) || p.repeat_penalty <= 0.0f)
    return SamplingProblem{SamplingField::RepeatPenalty, "finite and > 0 (1 disables it)",
                           describe(p.repeat_penalty)};
  if (p.repeat_last_n < -1)
    return SamplingProblem{SamplingField::RepeatLastN, ">= -1 (-1 means the whole history)",
                           describe(p.repeat_last_n)};
  if (!std::isfinite(p.presence_penalty) || std::fabs(p.presence_penalty) > 2.0f)
    return SamplingProblem{SamplingField::PresencePenalty, "in [-2, 2] (0 disables it)",
                           describe(p.presence_penalty)};
  if (!std::isfinite(p.frequency_penalty) || std::fabs(p.frequency_penalty) > 2.0f)
    return SamplingProblem{SamplingField::FrequencyPenalty, "in [-2, 2] (0 disables it)",
                           describe(p.frequency_penalty)};
  for (const auto& [id, bias] : p.logit_bias)
    if (bias != kNegativeInfinity && !(std::fabs(bias) <= kMaxLogitBias))
      return SamplingProblem{SamplingField::LogitBias,
                             "in [-100, 100] or -infinity (a ban) for token " + std::to_string(id),
                             describe(bias)};
  // Sorted, so a list as long as the vocabulary is checked in n log n.
  std::vector<int32_t> ids;
  ids.reserve(p.logit_bias.size());
  for (const auto& entry : p.logit_bias) ids.push_back(entry.first);
  std::sort(ids.begin(), ids.end());
  if (const auto twice = std::adjacent_find(ids.begin(), ids.end()); twice != ids.end())
    return SamplingProblem{SamplingField::LogitBias, "given once per token",
                           "token " + std::to_string(*twice) + " twice"};
  return std::nullopt;
}

const char* sampling_field_name(SamplingField field) {
  switch (field) {
    case SamplingField::Temperature:
      return "temperature";
    case SamplingField::TopK:
      return "top_k";
    case SamplingField::TopP:
      return "top_p";
    case SamplingField::MinP:
      return "min_p";
    case SamplingField::RepeatPenalty:
      return "repeat_penalty";
    case SamplingField::RepeatLastN:
      return "repeat_last_n";
    case SamplingField::PresencePenalty:
      return "presence_penalty";
    case SamplingField::FrequencyPenalty:
      return "frequency_penalty";
    case SamplingField::LogitBias:
      return "logit_bias";
  }
  return "?";
}

void SamplingParams::validate() const {
  if (const auto problem = find_sampling_problem(*this))
    throw Error(std::string("SamplingParams: ") + sampling_field_name(problem->field) + " must be " +
                problem->requirement + ", got " + problem->value);
}

void check_logit_bias_ids(const SamplingParams& params, int32_t n_valid_vocab) {
  for (const auto& [id, bias] : params.logit_bias)
    if (id < 0 || id >= n_valid_vocab)
      throw Error("logit_bias token " + std::to_string(id) + " is outside the vocabulary [0, " +
                  std::to_string(n_valid_vocab) + ")");
}

Sampler::Sampler(SamplingParams params, int32_t n_valid_vocab)
    : params_(params), n_valid_vocab_(n_valid_vocab), rng_(params.seed) {
  params_.validate();
  if (n_valid_vocab <= 0) {
    throw Error("Sampler: n_valid_vocab must be > 0, got " + std::to_string(n_valid_vocab));
  }
  check_logit_bias_ids(params_, n_valid_vocab);
  candidates_.reserve(static_cast<size_t>(n_valid_vocab));
  penalty_marks_.assign(static_cast<size_t>(n_valid_vocab), 0);
  if (params_.presence_penalty != 0.0f || params_.frequency_penalty != 0.0f)
    token_counts_.assign(static_cast<size_t>(n_valid_vocab), 0);
}

bool Sampler::adjusts_logits() const {
  return !params_.logit_bias.empty() || (params_.repeat_penalty != 1.0f && params_.repeat_last_n != 0) ||
         params_.presence_penalty != 0.0f || params_.frequency_penalty != 0.0f;
}

int32_t Sampler::sample(std::span<const float> logits, std::span<const int32_t> history,
                        size_t prompt_length) {
  if (logits.size() < static_cast<size_t>(n_valid_vocab_)) {
    throw Error("Sampler: logits has " + std::to_string(logits.size()) +
                " entries, fewer than the valid vocabulary size " + std::to_string(n_valid_vocab_));
  }
  if (params_.temperature == 0.0f && !adjusts_logits()) {
    // Greedy without bias or penalties needs no candidate list (a vocabulary-sized copy per token): the
    // answer is the first maximum of the logits, NaN counting as -inf, as sample_greedy finds it.
    int32_t best = 0;
    float best_logit = kNegativeInfinity;
    for (int32_t id = 0; id < n_valid_vocab_; ++id) {
      const float logit = logits[static_cast<size_t>(id)];
      if (logit > best_logit) {
        best = id;
        best_logit = logit;
      }
    }
    candidates_.assign(1, {best, best_logit, 1.0});
    return best;
  }
  load_penalised_logits(logits, history, prompt_length);
  if (params_.temperature == 0.0f) return sample_greedy();

  // A -inf logit has probability zero, so dropping it up front keeps it out of every later
  // step, including top-k, which would otherwise spend a slot on a token that cannot be drawn.
  std::erase_if(candidates_, [](const SampleCandidate& c) { return c.logit == kNegativeInfinity; });
  if (candidates_.empty()) {
    candidates_.push_back({0, kNegativeInfinity, 1.0});
    return 0;
  }
  candidates_sorted_ = false;
  keep_top_k();
  apply_softmax();
  keep_top_p();

  // The largest weight is exactly 1 after apply_softmax(), so p >= min_p * p_max reduces to
  // weight >= min_p. Weights that underflowed to zero go too: they can never be drawn, and
  // removing them keeps last_distribution() limited to tokens that really could come out.
  const double min_weight = params_.min_p;
  std::erase_if(candidates_, [min_weight](const SampleCandidate& c) {
    return c.probability <= 0.0 || c.probability < min_weight;
  });
  double total = 0.0;
  for (const SampleCandidate& c : candidates_) total += c.probability;
  for (SampleCandidate& c : candidates_) c.probability /= total;
  return draw();
}

void Sampler::load_penalised_logits(std::span<const float> logits, std::span<const int32_t> history,
                                    size_t prompt_length) {
  candidates_.resize(static_cast<size_t>(n_valid_vocab_));
  for (int32_t id = 0; id < n_valid_vocab_; ++id) {
    const float logit = logits[static_cast<size_t>(id)];
    candidates_[static_cast<size_t>(id)] = {id, std::isnan(logit) ? kNegativeInfinity : logit, 0.0};
  }
  for (const auto& [id, bias] : params_.logit_bias) {
    float& logit = candidates_[static_cast<size_t>(id)].logit;
    // A ban stays a ban even over a +inf logit, where the sum would be NaN.
    logit = bias == kNegativeInfinity ? kNegativeInfinity : logit + bias;
  }
  if (params_.repeat_penalty != 1.0f && params_.repeat_last_n != 0) apply_repeat_penalty(history);
  if (params_.presence_penalty != 0.0f || params_.frequency_penalty != 0.0f)
    apply_presence_frequency(history, std::min(prompt_length, history.size()));
}

uint32_t Sampler::next_mark_generation() {
  // A generation counter marks the ids already seen in this pass, so nothing vocabulary-sized
  // is cleared per call.
  if (++penalty_generation_ == 0) {
    std::fill(penalty_marks_.begin(), penalty_marks_.end(), 0);
    penalty_generation_ = 1;
  }
  return penalty_generation_;
}

void Sampler::apply_repeat_penalty(std::span<const int32_t> history) {
  size_t window = history.size();
  if (params_.repeat_last_n > 0) window = std::min(window, static_cast<size_t>(params_.repeat_last_n));
  const std::span<const int32_t> recent = history.last(window);

  // A token repeated many times is penalised once, as in llama.cpp.
  const uint32_t generation = next_mark_generation();
  const float penalty = params_.repeat_penalty;
  for (size_t i = 0; i < recent.size(); ++i) {
    const int32_t id = recent[i];
    if (id < 0 || id >= n_valid_vocab_) {
      throw Error("Sampler: history token " + std::to_string(id) + " at position " +
                  std::to_string(history.size() - recent.size() + i) +
                  " is outside the valid vocabulary [0, " + std::to_string(n_valid_vocab_) + ")");
    }
    uint32_t& mark = penalty_marks_[static_cast<size_t>(id)];
    if (mark == generation) continue;
    mark = generation;
    float& logit = candidates_[static_cast<size_t>(id)].logit;
    logit = logit > 0.0f ? logit / penalty : logit * penalty;
  }
}

void Sampler::apply_presence_frequency(std::span<const int32_t> history, size_t prompt_length) {
  // Counting the generated tokens afresh each call is linear in the output, which stays below the
  // vocabulary-sized pass above for any answer shorter than the vocabulary, and it keeps sample()
  // a function of its arguments (no count carried between calls to fall out of step).
  const std::span<const int32_t> generated = history.subspan(prompt_length);
  const uint32_t generation = next_mark_generation();
  for (size_t i = 0; i < generated.size(); ++i) {
    const int32_t id = generated[i];
    if (id < 0 || id >= n_valid_vocab_) {
      throw Error("Sampler: history token " + std::to_string(id) + " at position " +
                  std::to_string(prompt_length + i) + " is outside the valid vocabulary [0, " +
                  std::to_string(n_valid_vocab_) + ")");
    }
    uint32_t& mark = penalty_marks_[static_cast<size_t>(id)];
    uint32_t& count = token_counts_[static_cast<size_t>(id)];
    if (mark != generation) {
      mark = generation;
      count = 0;
    }
    ++count;
  }
  const double presence = params_.presence_penalty, frequency = params_.frequency_penalty;
  for (const int32_t id : generated) {
    uint32_t& count = token_counts_[static_cast<size_t>(id)];
    if (count == 0) continue;  // already penalised: its count was cleared below
    float& logit = candidates_[static_cast<size_t>(id)].logit;
    // In double, rounded once: the same bits as the double reference, on every machine. An
    // infinite logit stays infinite.
    logit =
        static_cast<float>(static_cast<double>(logit) - (presence + frequency * static_cast<double>(count)));
    count = 0;
  }
}

int32_t Sampler::sample_greedy() {
  // Strictly-greater comparison keeps the first (lowest) id among equal maxima, and leaves id 0
  // as the answer when every logit is -inf.
  size_t best = 0;
  for (size_t i = 1; i < candidates_.size(); ++i) {
    if (candidates_[i].logit > candidates_[best].logit) best = i;
  }
  candidates_[0] = candidates_[best];
  candidates_[0].probability = 1.0;
  candidates_.resize(1);
  return candidates_[0].id;
}

void Sampler::keep_top_k() {
  const size_t k = static_cast<size_t>(params_.top_k);
  if (k == 0 || k >= candidates_.size()) return;
  // nth_element is linear in the vocabulary; only the k survivors are sorted.
  std::nth_element(candidates_.begin(), candidates_.begin() + static_cast<ptrdiff_t>(k), candidates_.end(),
                   ranks_before);
  candidates_.resize(k);
  std::sort(candidates_.begin(), candidates_.end(), ranks_before);
  candidates_sorted_ = true;
}

void Sampler::apply_softmax() {
  float max_logit = kNegativeInfinity;
  for (const SampleCandidate& c : candidates_) max_logit = std::max(max_logit, c.logit);
  // With a +inf logit present the softmax limit puts all the mass, evenly, on the +inf tokens;
  // computing it literally would give inf - inf = NaN.
  if (max_logit == kPositiveInfinity) {
    for (SampleCandidate& c : candidates_) c.probability = c.logit == kPositiveInfinity ? 1.0 : 0.0;
    return;
  }
  const double inverse_temperature = 1.0 / static_cast<double>(params_.temperature);
  for (SampleCandidate& c : candidates_) {
    c.probability = std::exp((static_cast<double>(c.logit) - max_logit) * inverse_temperature);
  }
}

void Sampler::keep_top_p() {
  if (params_.top_p >= 1.0f) return;
  double total = 0.0;
  for (const SampleCandidate& c : candidates_) total += c.probability;
  const double target = static_cast<double>(params_.top_p) * total;

  // Without top-k the candidates are still in id order. Rather than sorting the whole
  // vocabulary, sort a growing head (selected by nth_element) until its cumulative mass reaches
  // the target. The head of a total order is the same whichever size it is sorted at, so the
  // cut is exactly the one a full sort would give.
  const size_t n = candidates_.size();
  size_t head = candidates_sorted_ ? n : std::min<size_t>(n, 64);
  while (true) {
    if (!candidates_sorted_) {
      if (head < n) {
        std::nth_element(candidates_.begin(), candidates_.begin() + static_cast<ptrdiff_t>(head),
                         candidates_.end(), ranks_before);
      }
      std::sort(candidates_.begin(), candidates_.begin() + static_cast<ptrdiff_t>(head), ranks_before);
    }
    double cumulative = 0.0;
    for (size_t i = 0; i < head; ++i) {
      cumulative += candidates_[i].probability;
      if (cumulative >= target) {
        candidates_.resize(i + 1);
        candidates_sorted_ = true;
        return;
      }
    }
    // Rounding can leave the full cumulative sum a hair below the target when top_p is just
    // under 1; every candidate then stays.
    if (head == n) {
      candidates_sorted_ = true;
      return;
    }
    head = std::min(n, head * 8);
  }
}

int32_t Sampler::draw() {
  const double u = uniform_from_bits(rng_());
  double cumulative = 0.0;
  for (const SampleCandidate& c : candidates_) {
    cumulative += c.probability;
    if (u < cumulative) return c.id;
  }
  // The normalised probabilities can sum to a hair under 1; a draw beyond the sum belongs to
  // the last candidate, which has a non-zero probability.
  return candidates_.back().id;
}

}  // namespace mb

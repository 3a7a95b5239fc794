// SPDX-License-Identifier: MIT
// logit_bias and the presence and frequency penalties of the sampler, against a double-precision
// reference of the order sampler.h documents: bias, repetition penalty, presence/frequency. A
// logit nothing touches keeps its bits.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <random>
#include <vector>

#include "core/error.h"
#include "engine/request_decoder.h"
#include "engine/sampler.h"

namespace mb {
namespace {

constexpr float kBiasInf = std::numeric_limits<float>::infinity();

// Every filter off, so last_distribution() holds every token with a non-zero probability.
SamplingParams open_params(float temperature = 1.0f) {
  SamplingParams p;
  p.temperature = temperature;
  p.top_k = 0;
  p.top_p = 1.0f;
  p.min_p = 0.0f;
  p.repeat_penalty = 1.0f;
  p.seed = 3;
  return p;
}

std::vector<float> bias_test_logits(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.5f);
  std::vector<float> logits(n);
  for (float& l : logits) l = normal(rng);
  return logits;
}

// The reference of steps 1-3 of sampler.h: the bias as one float addition, CTRL over the distinct
// ids of the whole history, then presence + frequency * count over the generated part, in double,
// rounded to float once.
std::vector<float> reference_adjusted(std::vector<float> logits, const SamplingParams& p,
                                      const std::vector<int32_t>& history, size_t prompt_length) {
  for (const auto& [id, bias] : p.logit_bias) logits[id] = bias == -kBiasInf ? -kBiasInf : logits[id] + bias;
  if (p.repeat_penalty != 1.0f) {
    std::map<int32_t, bool> seen;
    for (int32_t id : history)
      if (!seen[id]) {
        seen[id] = true;
        logits[id] = logits[id] > 0.0f ? logits[id] / p.repeat_penalty : logits[id] * p.repeat_penalty;
      }
  }
  std::map<int32_t, int> counts;
  for (size_t i = prompt_length; i < history.size(); ++i) ++counts[history[i]];
  for (const auto& [id, count] : counts) {
    const double penalty = static_cast<double>(p.presence_penalty) +
                           static_cast<double>(p.frequency_penalty) * static_cast<double>(count);
    logits[id] = static_cast<float>(static_cast<double>(logits[id]) - penalty);
  }
  return logits;
}

std::map<int32_t, float> adjusted_logits_of(const Sampler& sampler) {
  std::map<int32_t, float> out;
  for (const SampleCandidate& c : sampler.last_distribution()) out[c.id] = c.logit;
  return out;
}

bool same_float_bits(float a, float b) {
  return std::memcmp(&a, &b, sizeof a) == 0;
}

TEST(SamplerBias, BiasChangesOnlyTheBiasedLogitsAndABanIsNeverDrawn) {
  const std::vector<float> logits = bias_test_logits(300, 1);
  SamplingParams p = open_params();
  p.logit_bias = {{7, 100.0f}, {8, -100.0f}, {9, 0.25f}, {10, -kBiasInf}, {11, -3.5f}, {12, 0.0f}};
  Sampler sampler(p, 300);
  const std::vector<float> want = reference_adjusted(logits, p, {}, 0);
  sampler.sample(logits, {});
  const std::map<int32_t, float> got = adjusted_logits_of(sampler);
  for (int32_t id = 0; id < 300; ++id) {
    if (id == 10) {
      EXPECT_EQ(got.count(10), 0u) << "a banned token is a candidate";
      continue;
    }
    if (!got.count(id)) continue;  // its probability underflowed next to the +100 token
    EXPECT_TRUE(same_float_bits(got.at(id), want[id])) << id << ": " << got.at(id) << " vs " << want[id];
    if (id < 7 || id > 12) {
      EXPECT_TRUE(same_float_bits(got.at(id), logits[id])) << id;
    }
  }
  // +100 dominates: every draw is token 7; -inf never comes out, even when it was the argmax.
  for (int i = 0; i < 50; ++i) EXPECT_EQ(sampler.sample(logits, {}), 7);
  std::vector<float> peaked = logits;
  peaked[10] = 50.0f;
  SamplingParams ban = open_params(0.0f);
  ban.logit_bias = {{10, -kBiasInf}};
  Sampler greedy(ban, 300);
  EXPECT_NE(greedy.sample(peaked, {}), 10);
  peaked[10] = kBiasInf;  // a ban beats even +inf (whose sum with -inf would be NaN)
  EXPECT_NE(greedy.sample(peaked, {}), 10);
}

TEST(SamplerBias, GreedyArgmaxSeesTheBias) {
  std::vector<float> logits = bias_test_logits(64, 2);
  const int32_t best = static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
  const int32_t low = best == 0 ? 1 : 0;
  SamplingParams p = open_params(0.0f);
  EXPECT_EQ(Sampler(p, 64).sample(logits, {}), best);
  p.logit_bias = {{low, 30.0f}};
  EXPECT_EQ(Sampler(p, 64).sample(logits, {}), low);
}

TEST(SamplerBias, PresenceAndFrequencyFollowTheDoubleReferenceOverGeneratedTokensOnly) {
  const std::vector<float> logits = bias_test_logits(200, 3);
  // The prompt holds 5 and 6 (never generated: untouched), 40 is generated three times and
  // appears in the prompt too (counted three times, not four), 41 once.
  const std::vector<int32_t> history = {5, 6, 40, 5, 40, 41, 40, 40};
  const size_t prompt_length = 4;
  for (const auto& [presence, frequency] :
       std::vector<std::pair<float, float>>{{0.7f, 0.0f}, {0.0f, 0.3f}, {1.1f, -0.45f}, {-2.0f, 2.0f}}) {
    SamplingParams p = open_params();
    p.presence_penalty = presence;
    p.frequency_penalty = frequency;
    Sampler sampler(p, 200);
    sampler.sample(logits, history, prompt_length);
    const std::vector<float> want = reference_adjusted(logits, p, history, prompt_length);
    const std::map<int32_t, float> got = adjusted_logits_of(sampler);
    for (const auto& [id, logit] : got)
      EXPECT_TRUE(same_float_bits(logit, want[id])) << presence << "/" << frequency << " id " << id;
    for (int32_t untouched : {5, 6, 7})
      if (got.count(untouched)) {
        EXPECT_TRUE(same_float_bits(got.at(untouched), logits[untouched]));
      }
    EXPECT_FALSE(same_float_bits(got.at(40), logits[40]));
  }
}

TEST(SamplerBias, TheBiasComesBeforeTheRepetitionPenaltyWhichComesBeforePresence) {
  std::vector<float> logits(16, 0.0f);
  logits[3] = 2.0f;
  SamplingParams p = open_params();
  p.logit_bias = {{3, -5.0f}};  // 2 - 5 = -3: negative, so CTRL multiplies it
  p.repeat_penalty = 2.0f;
  p.repeat_last_n = -1;
  p.presence_penalty = 1.0f;
  Sampler sampler(p, 16);
  const std::vector<int32_t> history = {3, 3};
  sampler.sample(logits, history, 1);
  // Bias first: (2 - 5) * 2 - 1 = -7. Penalty first would give 2 / 2 - 5 - 1 = -5.
  EXPECT_EQ(adjusted_logits_of(sampler).at(3), -7.0f);
  EXPECT_TRUE(
      same_float_bits(adjusted_logits_of(sampler).at(3), reference_adjusted(logits, p, history, 1)[3]));
}

TEST(SamplerBias, TheDecoderPenalisesWhatItGeneratedNotThePrompt) {
  // Token 2 leads the logits; the prompt is full of it. With a strong presence penalty the first
  // token is still 2 (the prompt does not count), the second is not (2 was generated).
  std::vector<float> logits(8, 0.0f);
  logits[2] = 1.0f;
  logits[4] = 0.5f;
  DecodeSettings settings;
  settings.sampling = open_params(0.0f);
  settings.sampling.presence_penalty = 2.0f;
  settings.max_tokens = 2;
  settings.stop_at_eos = false;
  GenerationVocabulary vocabulary;
  vocabulary.n_valid = 8;
  vocabulary.n_model = 8;
  const std::vector<int32_t> prompt = {2, 2, 2};
  RequestDecoder decoder(settings, prompt, vocabulary, nullptr);
  EXPECT_EQ(decoder.on_logits(logits).token, 2);
  EXPECT_EQ(decoder.on_logits(logits).token, 4);
}

TEST(SamplerBias, OutOfRangeValuesAndIdsAreRefusedByName) {
  const auto refused = [](const SamplingParams& p, const std::string& fragment, int32_t vocab = 10) {
    try {
      Sampler sampler(p, vocab);
      ADD_FAILURE() << "accepted; wanted " << fragment;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
    }
  };
  SamplingParams p = open_params();
  p.presence_penalty = 2.5f;
  refused(p, "presence_penalty must be in [-2, 2]");
  p = open_params();
  p.frequency_penalty = -std::numeric_limits<float>::quiet_NaN();
  refused(p, "frequency_penalty must be in [-2, 2]");
  p = open_params();
  p.logit_bias = {{1, 100.5f}};
  refused(p, "logit_bias must be in [-100, 100] or -infinity (a ban) for token 1");
  p.logit_bias = {{1, kBiasInf}};
  refused(p, "logit_bias must be in [-100, 100]");
  p.logit_bias = {{4, 1.0f}, {2, 1.0f}, {4, -1.0f}};
  refused(p, "token 4 twice");
  p.logit_bias = {{10, 1.0f}};
  refused(p, "logit_bias token 10 is outside the vocabulary [0, 10)");
  p.logit_bias = {{-1, 1.0f}};
  refused(p, "logit_bias token -1 is outside the vocabulary");
  // validate_request checks the ids against the vocabulary too, before any work.
  DecodeSettings settings;
  settings.sampling = open_params();
  settings.sampling.logit_bias = {{12, 1.0f}};
  GenerationVocabulary vocabulary;
  vocabulary.n_valid = 12;
  vocabulary.n_model = 16;
  const std::vector<int32_t> prompt = {1};
  EXPECT_THROW(validate_request(prompt, settings, vocabulary, nullptr), Error);
}

}  // namespace
}  // namespace mb

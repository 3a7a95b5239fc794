// SPDX-License-Identifier: MIT
// Token sampling for text generation: logit bias, repetition, presence and frequency penalties,
// top-k, temperature, top-p, min-p.
//
// The filters run in the order below, which is the order Hugging Face transformers applies them
// in. llama.cpp's default chain orders penalties, top-k, top-p and min-p the same way but applies
// temperature last, so there the top-p nucleus and the min-p threshold come from the
// temperature-1 distribution; here they come from the temperature-scaled one.
//
//   1. logit bias          OpenAI's logit_bias: each listed id's logit plus its bias (one float
//                          addition; a bias of -infinity bans the id, as llama.cpp's `false`).
//                          It comes first, as in OpenAI and llama.cpp, so the penalties below see
//                          the biased logit. No other logit changes.
//   2. repetition penalty  CTRL semantics over the distinct ids of the last `repeat_last_n`
//                          history tokens: a positive logit is divided by the penalty, any other
//                          logit is multiplied by it, so a penalty > 1 always makes a repeat less
//                          likely.
//   3. presence/frequency  OpenAI's: logit -= presence * (count > 0) + frequency * count, where
//                          count is how often the id was GENERATED so far in this request
//                          (computed in double, rounded to float once). Only generated tokens
//                          count, not the prompt, and no repeat_last_n window applies: that is
//                          what OpenAI documents and vLLM does, so a client tuned against them
//                          gets the same distribution here. (llama.cpp applies them over its
//                          repeat_last_n window of prompt and output; that would make a long
//                          chat's system prompt penalise the words the answer needs.)
//   4. top-k               keep the k largest logits; ties at the cut keep the lowest ids.
//   5. softmax             over logit / temperature.
//   6. top-p               keep the smallest prefix of the candidates sorted by probability
//                          (descending, ties by ascending id) whose mass reaches top_p.
//   7. min-p               keep the tokens whose probability is >= min_p times the largest one.
//   8. draw                one uniform number in [0, 1) against the renormalised distribution.
//
// temperature == 0 skips steps 4-8 and returns the argmax of the biased and penalised logits,
// ties going to the lowest id; greedy sampling consumes no random numbers.
//
// Determinism: the random stream is std::mt19937_64, whose output the C++ standard defines
// exactly, mapped to [0, 1) by taking its top 53 bits (std::uniform_real_distribution is not
// used because its output differs between standard libraries). Every reduction runs in a fixed
// order in double precision. The one remaining platform dependence is exp(), which libm
// implementations may round differently by an ulp; that changes a token only when a draw lands
// within rounding distance of a cumulative boundary.
#pragma once

#include <cstdint>
#include <optional>
#include <random>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace mb {

struct SamplingParams {
  float temperature = 0.8f;        // 0 = greedy (argmax, ties -> lowest id)
  int top_k = 40;                  // 0 = disabled
  float top_p = 0.95f;             // 1 = disabled
  float min_p = 0.05f;             // 0 = disabled; keep tokens with p >= min_p * p_max
  float repeat_penalty = 1.0f;     // 1 = disabled
  int repeat_last_n = 64;          // -1 = whole history, 0 = no penalty
  float presence_penalty = 0.0f;   // in [-2, 2]; 0 = disabled (generated tokens only, see above)
  float frequency_penalty = 0.0f;  // in [-2, 2]; 0 = disabled
  // (id, bias) pairs, each id at most once; a bias is finite in [-100, 100] or -infinity (a ban).
  // The ids are checked against the vocabulary by the Sampler (and validate_request).
  std::vector<std::pair<int32_t, float>> logit_bias = {};
  uint64_t seed = 0;

  // Throws mb::Error naming the parameter and its value when any field is out of range or
  // not finite.
  void validate() const;
};

enum class SamplingField {
  Temperature,
  TopK,
  TopP,
  MinP,
  RepeatPenalty,
  RepeatLastN,
  PresencePenalty,
  FrequencyPenalty,
  LogitBias
};

// The most a logit_bias may add or subtract (OpenAI's range); -infinity is also taken, as a ban.
inline constexpr float kMaxLogitBias = 100.0f;
// Throws mb::Error naming the first logit_bias id outside [0, n_valid_vocab).
void check_logit_bias_ids(const SamplingParams& params, int32_t n_valid_vocab);

// One out-of-range field of SamplingParams: which one, what it must be and what it is, so a
// caller can report it under its own name for the field (a command-line flag, say).
struct SamplingProblem {
  SamplingField field;
  std::string requirement;  // e.g. "in (0, 1] (1 disables it)"
  std::string value;
};

// The first field of `params` that is out of range or not finite, if any.
std::optional<SamplingProblem> find_sampling_problem(const SamplingParams& params);
// The field's name in SamplingParams ("temperature", "top_k", ...).
const char* sampling_field_name(SamplingField field);

// One token the last draw could have produced, with its penalised logit (before temperature)
// and its probability in the final, renormalised distribution.
struct SampleCandidate {
  int32_t id;
  float logit;
  double probability;
};

class Sampler {
 public:
  // Ids >= n_valid_vocab are padding rows of the output projection and are never produced.
  // Throws mb::Error on invalid params or a non-positive n_valid_vocab.
  Sampler(SamplingParams params, int32_t n_valid_vocab);

  // Picks the next token. `logits` must hold at least n_valid_vocab entries; NaN counts as -inf.
  // `history` is the prompt plus the tokens generated so far, oldest first, and its first
  // `prompt_length` ids are the prompt (the presence and frequency penalties read only the rest);
  // it is read only when a penalty is enabled, and then every id it reads must lie in
  // [0, n_valid_vocab). When no token has a finite or +inf logit the result is id 0, the lowest
  // valid id, as the argmax tie rule would give.
  int32_t sample(std::span<const float> logits, std::span<const int32_t> history, size_t prompt_length = 0);

  // The tokens the last sample() call could have returned and their probabilities, in the
  // order the draw walked them. After a greedy call it holds only the chosen token.
  std::span<const SampleCandidate> last_distribution() const { return candidates_; }

  const SamplingParams& params() const { return params_; }
  int32_t n_valid_vocab() const { return n_valid_vocab_; }

 private:
  void load_penalised_logits(std::span<const float> logits, std::span<const int32_t> history,
                             size_t prompt_length);
  void apply_repeat_penalty(std::span<const int32_t> history);
  void apply_presence_frequency(std::span<const int32_t> history, size_t prompt_length);
  uint32_t next_mark_generation();
  // Whether anything changes the logits before the filters (bias, penalties).
  bool adjusts_logits() const;
  int32_t sample_greedy();
  void keep_top_k();
  void apply_softmax();
  void keep_top_p();
  int32_t draw();

  SamplingParams params_;
  int32_t n_valid_vocab_;
  std::mt19937_64 rng_;

  // Scratch reused across calls; both reach their full size in the constructor, so sample()
  // never allocates.
  std::vector<SampleCandidate> candidates_;
  std::vector<uint32_t> penalty_marks_;
  std::vector<uint32_t> token_counts_;  // valid where penalty_marks_ holds the current generation
  uint32_t penalty_generation_ = 0;
  bool candidates_sorted_ = false;
};

}  // namespace mb

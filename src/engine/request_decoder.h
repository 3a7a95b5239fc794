// SPDX-License-Identifier: MIT
// The per-request half of generation, shared by Generator (engine/generate.h) and Scheduler
// (engine/scheduler.h): what is done with each row of logits a request gets, and which prompts
// are accepted.
//
// Both entry points run the model their own way (Generator a fixed batch to the end, the
// scheduler requests joining and leaving between steps), but a request must end the same way
// and with the same tokens under either, so everything that decides a request's output lives
// here once: the sampler, the token history the repetition penalty reads, the detokenizer and
// the stop strings, the EOS ids, max_tokens and the stop reason.
//
// The prompt-id rule: a prompt id is valid iff 0 <= id < n_valid, where n_valid is the smaller
// of the model's vocab_size and the tokenizer's vocabulary (the model's vocab_size when there is
// no tokenizer). These are exactly the ids the sampler can produce. Ids between the tokenizer's
// vocabulary and the model's vocab_size are padding rows of the embedding: the model would take
// them, but they have no text and were never trained, and the repetition penalty, which reads
// the prompt, cannot index them; refusing them up front keeps a request from failing halfway.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "engine/sampler.h"
#include "engine/stop_strings.h"
#include "engine/token_constraint.h"
#include "model/config.h"
#include "tokenizer/tokenizer.h"

namespace mb {

enum class StopReason { MaxTokens, Eos, StopString, Callback };
const char* stop_reason_name(StopReason reason);

// What a model and its tokenizer allow a request, computed once per Generator or Scheduler.
struct GenerationVocabulary {
  // The config's eos_token_ids, then the tokenizer's end-of-text ids not already among them.
  std::vector<int32_t> eos_ids;
  // Ids [0, n_valid) are the ones sampled and the ones a prompt may hold (see the rule above).
  int32_t n_valid = 0;
  // The model's vocab_size (the width of its logits), kept to explain a refused padding id.
  int64_t n_model = 0;
};
GenerationVocabulary generation_vocabulary(const ModelConfig& config, const Tokenizer* tokenizer);

// Throws mb::Error "<what> token <id> at position <i> is outside the vocabulary [0, <n_valid>)"
// for the first id that breaks the prompt-id rule, adding why when it is a padding row.
void check_token_ids(std::span<const int32_t> ids, const GenerationVocabulary& vocabulary,
                     std::string_view what);

// How one request is decoded; Generator and Scheduler fill it from their own request types.
struct DecodeSettings {
  SamplingParams sampling;
  int max_tokens = 16;                    // >= 0
  std::vector<std::string> stop_strings;  // need a tokenizer; none may be empty
  bool stop_at_eos = true;
  // Which tokens may come next (a grammar, ...); null: any. The decoder works on its own clone(),
  // so one constraint can seed any number of requests.
  std::shared_ptr<TokenConstraint> constraint = nullptr;
};

// Throws mb::Error naming the first problem of a request: an empty prompt, a prompt id that
// breaks the prompt-id rule, a negative max_tokens, sampling parameters out of range (a logit_bias
// id outside the vocabulary included), an empty
// stop string, or stop strings without a tokenizer. Both entry points call it before any work.
void validate_request(std::span<const int32_t> prompt, const DecodeSettings& settings,
                      const GenerationVocabulary& vocabulary, const Tokenizer* tokenizer);

// What one row of logits did to a request.
struct DecodeEvent {
  // The generated id; empty when no token is produced: an EOS id ended the request (an EOS is
  // not part of the output), or max_tokens is 0.
  std::optional<int32_t> token;
  std::string text;  // the text that became final with this token (may be empty)
  bool done = false;
  StopReason stop_reason = StopReason::MaxTokens;  // why the request ended, when done
};

class RequestDecoder {
 public:
  // `settings` must have passed validate_request. `tokenizer` (may be null: ids only) must
  // outlive the decoder.
  RequestDecoder(const DecodeSettings& settings, std::span<const int32_t> prompt,
                 const GenerationVocabulary& vocabulary, const Tokenizer* tokenizer);

  // Consumes the logits of the request's next position (at least n_valid of them): samples a
  // token, then decides in this order whether it is an EOS id, completes a stop string or
  // reaches max_tokens. A token that is not an EOS joins the history and yields its text piece.
  // With max_tokens 0 nothing is sampled and the request ends at once. Throws mb::Error when
  // called after the request ended, and when no logit of the vocabulary is finite (NaN or
  // infinite weights), which no token can honestly be sampled from.
  //
  // With a constraint, the sampler reads a copy of the row in which the constraint masked what
  // may not come next (the EOS ids keep their logits iff may_end(), whatever the mask did to
  // them); every other logit is the model's, bit for bit. The accepted token advances the
  // constraint, and when must_end() the request ends with that token (StopReason::Eos) without
  // another step. A constraint that allows nothing (and may not end) is an mb::Error. The
  // sampler's distribution, and so the post-sampling log-probabilities, are the constrained
  // ones; callers that compute raw-logit probabilities from the row they passed in report the
  // model's unconstrained distribution.
  DecodeEvent on_logits(std::span<const float> logits);

  // Ends the request by StopReason::Callback: its receiver refused the last event or cancelled.
  // It replaces the reason that event carried, which the receiver did not take.
  void cancel();

  bool done() const { return done_; }
  StopReason stop_reason() const { return stop_reason_; }

  // At the end: the text held back so far (an incomplete character, the start of a possible
  // stop string), which nothing can complete any more; empty after a stop string. Call once.
  std::string finish();
  // The stop string that ended the request (StopReason::StopString); empty otherwise.
  std::string matched_stop() const { return stops_ ? std::string(stops_->matched_stop()) : std::string(); }

  // The sampler's last distribution is that of the token on_logits last returned, so callers
  // compute its log-probabilities from it (engine/token_logprobs.h).
  const Sampler& sampler() const { return sampler_; }
  // The prompt and every generated token, oldest first.
  std::span<const int32_t> history() const { return history_; }
  int64_t generated() const { return generated_; }

 private:
  Sampler sampler_;
  std::vector<int32_t> history_;  // prompt + generated, for the penalties
  size_t prompt_length_;          // the presence and frequency penalties read history_ past it
  std::optional<StreamDecoder> detokenizer_;
  std::optional<StopStringMatcher> stops_;
  std::vector<int32_t> eos_ids_;  // empty without stop_at_eos
  // Copies of a decoder (a request forked into several choices) each get their own clone.
  struct OwnedConstraint {
    std::unique_ptr<TokenConstraint> value;  // null: none
    OwnedConstraint() = default;
    OwnedConstraint(const OwnedConstraint& other) : value(other.value ? other.value->clone() : nullptr) {}
    OwnedConstraint& operator=(const OwnedConstraint& other) {
      if (this != &other) value = other.value ? other.value->clone() : nullptr;
      return *this;
    }
    OwnedConstraint(OwnedConstraint&&) noexcept = default;
    OwnedConstraint& operator=(OwnedConstraint&&) noexcept = default;
  };

  // The row with the constraint's mask applied (see on_logits).
  std::span<const float> constrain(std::span<const float> logits);

  OwnedConstraint constraint_;
  std::vector<float> masked_;  // the constrained copy of a row
  int32_t n_valid_;
  int max_tokens_;
  int64_t generated_ = 0;
  bool done_ = false;
  StopReason stop_reason_ = StopReason::MaxTokens;
};

}  // namespace mb

// SPDX-License-Identifier: MIT
// Text and token generation on top of a Model: batched prefill of the prompts, then batched
// decode steps with a RequestDecoder per request (engine/request_decoder.h: sampler, EOS, stop
// strings, max tokens; the one the scheduler uses too) and streaming callbacks.
//
// Each request of a batch gets exactly the tokens it would get alone (the model is batch
// invariant bit for bit and every request has its own sampler). After generation the state has
// consumed the prompt and every returned token, so a later request on the same state (or on a
// saved and restored copy) continues exactly as one uninterrupted run.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "engine/request_decoder.h"
#include "engine/sampler.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"

namespace mb {

struct GenerateRequest {
  std::vector<int32_t> prompt;  // at least one token, every id valid (engine/request_decoder.h)
  int max_new_tokens = 16;
  SamplingParams sampling;                // temperature 0 = greedy
  std::vector<std::string> stop_strings;  // need a tokenizer
  bool stop_at_eos = true;
  std::shared_ptr<TokenConstraint> constraint = nullptr;  // null: any token (engine/token_constraint.h)
};

struct GenerateResult {
  std::vector<int32_t> tokens;  // generated ids (an EOS that ended generation is not included)
  std::string text;             // detokenized, stop string removed; empty without a tokenizer
  StopReason stop_reason = StopReason::MaxTokens;
  int64_t prompt_tokens = 0;
  double prefill_seconds = 0, decode_seconds = 0;
};

struct StreamEvent {
  size_t request;  // index in the batch
  int32_t token;
  std::string_view text;  // text that became final with this token (may be empty)
};
// Return false to stop that request.
using StreamCallback = std::function<bool(const StreamEvent&)>;

class Generator {
 public:
  // `tokenizer` may be null (token ids only). `prefill_chunk`: positions per round for prompts.
  Generator(const Model& model, const Tokenizer* tokenizer, ComputeContext ctx, int64_t prefill_chunk = 512);

  GenerateResult generate(const GenerateRequest& request, SequenceState& state,
                          const StreamCallback& on_token = {});
  std::vector<GenerateResult> generate_batch(std::span<const GenerateRequest> requests,
                                             std::span<SequenceState* const> states,
                                             const StreamCallback& on_token = {});

  std::vector<int32_t> eos_ids() const { return vocabulary_.eos_ids; }
  const GenerationVocabulary& vocabulary() const { return vocabulary_; }

 private:
  const Model& model_;
  const Tokenizer* tokenizer_;
  ComputeContext ctx_;
  int64_t prefill_chunk_;
  GenerationVocabulary vocabulary_;
  Workspace workspace_;
};

}  // namespace mb

// SPDX-License-Identifier: MIT
#include "engine/request_decoder.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/error.h"

namespace mb {

const char* stop_reason_name(StopReason reason) {
  switch (reason) {
    case StopReason::MaxTokens:
      return "max_tokens";
    case StopReason::Eos:
      return "eos";
    case StopReason::StopString:
      return "stop_string";
    case StopReason::Callback:
      return "callback";
  }
  return "?";
}

GenerationVocabulary generation_vocabulary(const ModelConfig& config, const Tokenizer* tokenizer) {
  GenerationVocabulary vocabulary;
  vocabulary.eos_ids = config.eos_token_ids;
  vocabulary.n_model = config.vocab_size;
  vocabulary.n_valid = static_cast<int32_t>(config.vocab_size);
  if (tokenizer != nullptr) {
    for (int32_t id : tokenizer->eos_token_ids())
      if (std::ranges::find(vocabulary.eos_ids, id) == vocabulary.eos_ids.end())
        vocabulary.eos_ids.push_back(id);
    // Rows past the tokenizer's vocabulary are padding: they are never sampled.
    vocabulary.n_valid = std::min(vocabulary.n_valid, tokenizer->vocab_size());
  }
  return vocabulary;
}

void check_token_ids(std::span<const int32_t> ids, const GenerationVocabulary& vocabulary,
                     std::string_view what) {
  const auto bad = std::ranges::find_if(ids, [&](int32_t id) { return id < 0 || id >= vocabulary.n_valid; });
  if (bad == ids.end()) return;
  const int32_t id = *bad;
  std::string message = std::string(what) + " token " + std::to_string(id) + " at position " +
                        std::to_string(bad - ids.begin()) + " is outside the vocabulary [0, " +
                        std::to_string(vocabulary.n_valid) + ")";
  // The model would take such an id, so say why it is refused all the same.
  if (id >= vocabulary.n_valid && id < vocabulary.n_model)
    message += ": ids " + std::to_string(vocabulary.n_valid) + " to " +
               std::to_string(vocabulary.n_model - 1) +
               " are padding rows of the model's embedding, with no token in the tokenizer";
  throw Error(message);
}

void validate_request(std::span<const int32_t> prompt, const DecodeSettings& settings,
                      const GenerationVocabulary& vocabulary, const Tokenizer* tokenizer) {
  if (prompt.empty()) throw Error("the prompt is empty (a request needs at least one token)");
  check_token_ids(prompt, vocabulary, "prompt");
  if (settings.max_tokens < 0)
    throw Error("max_tokens must be >= 0, got " + std::to_string(settings.max_tokens));
  settings.sampling.validate();
  check_logit_bias_ids(settings.sampling, vocabulary.n_valid);
  if (!settings.stop_strings.empty()) {
    if (tokenizer == nullptr)
      throw Error("stop strings need a tokenizer (the model folder has no tokenizer.json)");
    StopStringMatcher check(settings.stop_strings);  // throws for an empty stop string
  }
}

RequestDecoder::RequestDecoder(const DecodeSettings& settings, std::span<const int32_t> prompt,
                               const GenerationVocabulary& vocabulary, const Tokenizer* tokenizer)
    : sampler_(settings.sampling, vocabulary.n_valid),
      history_(prompt.begin(), prompt.end()),
      prompt_length_(prompt.size()),
      n_valid_(vocabulary.n_valid),
      max_tokens_(settings.max_tokens) {
  if (tokenizer != nullptr) detokenizer_.emplace(*tokenizer);
  if (!settings.stop_strings.empty()) stops_.emplace(settings.stop_strings);
  if (settings.stop_at_eos) eos_ids_ = vocabulary.eos_ids;
  if (settings.constraint) constraint_.value = settings.constraint->clone();
}

std::span<const float> RequestDecoder::constrain(std::span<const float> logits) {
  masked_.assign(logits.begin(), logits.end());
  constraint_.value->mask(masked_);
  // The end of sequence is the decoder's to allow: the mask knows nothing of EOS ids.
  const bool may_end = constraint_.value->may_end();
  for (int32_t id : eos_ids_)
    if (id >= 0 && static_cast<size_t>(id) < masked_.size())
      masked_[id] = may_end ? logits[id] : -std::numeric_limits<float>::infinity();
  const auto valid =
      std::span<const float>(masked_).first(std::min(masked_.size(), static_cast<size_t>(n_valid_)));
  if (std::none_of(valid.begin(), valid.end(), [](float x) { return std::isfinite(x); }))
    throw Error("the output constraint (grammar) allows no token at generated token " +
                std::to_string(generated_) + (may_end ? "" : " and the text may not end there"));
  return masked_;
}

DecodeEvent RequestDecoder::on_logits(std::span<const float> logits) {
  if (done_) throw Error("RequestDecoder::on_logits: the request has already ended");
  DecodeEvent event;
  const auto end = [&](StopReason reason) {
    done_ = true;
    stop_reason_ = reason;
    event.done = true;
    event.stop_reason = reason;
  };
  if (max_tokens_ == 0) {
    end(StopReason::MaxTokens);
    return event;
  }
  // The sampler reads NaN as -inf, so a model whose logits are all NaN (corrupt weights) would
  // "sample" id 0 or end at an EOS id and be reported as a normal stop.
  const auto valid = logits.first(std::min(logits.size(), static_cast<size_t>(n_valid_)));
  if (std::none_of(valid.begin(), valid.end(), [](float x) { return std::isfinite(x); }))
    throw Error("the model's logits are not finite (NaN or infinite) at generated token " +
                std::to_string(generated_) + ": its weights or its input hold NaN or infinite values");
  if (constraint_.value && constraint_.value->must_end()) {
    end(StopReason::Eos);  // the grammar matched the empty text only: nothing may be sampled
    return event;
  }
  const int32_t token =
      sampler_.sample(constraint_.value ? constrain(logits) : logits, history_, prompt_length_);
  if (std::ranges::find(eos_ids_, token) != eos_ids_.end()) {
    end(StopReason::Eos);
    return event;
  }
  if (constraint_.value) constraint_.value->accept(token);
  history_.push_back(token);
  ++generated_;
  event.token = token;
  if (detokenizer_) event.text = detokenizer_->push(token);
  if (stops_) event.text = stops_->push(event.text);
  if (stops_ && stops_->stopped())
    end(StopReason::StopString);
  else if (constraint_.value && constraint_.value->must_end())
    end(StopReason::Eos);  // nothing may follow, so the model's EOS is the only way on
  else if (generated_ >= max_tokens_)
    end(StopReason::MaxTokens);
  return event;
}

void RequestDecoder::cancel() {
  done_ = true;
  stop_reason_ = StopReason::Callback;
}

std::string RequestDecoder::finish() {
  std::string tail = detokenizer_ ? detokenizer_->finish() : std::string();
  if (!stops_) return tail;
  if (stops_->stopped()) return {};
  // The tail goes through the matcher before its held-back text is flushed, in that order.
  std::string text = stops_->push(tail);
  text += stops_->flush();
  return text;
}

}  // namespace mb

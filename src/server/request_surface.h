// SPDX-License-Identifier: MIT
// The rest of the OpenAI request surface (issue 44, item 7), kept out of openai_api.cc so that
// file keeps small hooks only: n > 1 choices, logit_bias, presence_penalty / frequency_penalty,
// max_completion_tokens, stream_options, and the fields this server refuses by name or ignores.
//
// Every field is untrusted: a wrong type or range is a 400 naming the field and the value.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "server/openai_api.h"

namespace mb::server {

// The most logit_bias entries one request may carry (each id at most once, so a vocabulary's
// worth; the largest vocabularies in use are about 256K).
inline constexpr size_t kMaxLogitBiasEntries = size_t{1} << 18;

// presence_penalty and frequency_penalty (numbers in [-2, 2]) and logit_bias into `sampling`.
// logit_bias is OpenAI's object {"<id>": bias} or llama-server's list [[id, bias], ...]; a bias is
// a number in [-100, 100], or false (llama-server's ban: -infinity). The ids are checked against
// the vocabulary later (check_logit_bias_vocabulary), where it is known.
void read_penalties_and_bias(const nlohmann::json& body, SamplingParams& sampling);

// Throws a 400 naming the first logit_bias id outside [0, n_valid), n_valid being the smaller of
// the tokenizer's vocabulary and the model's vocab_size (0 = unknown).
void check_logit_bias_vocabulary(const SamplingParams& sampling, const Tokenizer& tokenizer,
                                 int64_t vocab_size);

// n: choices per request, 1..kMaxChoices (a 400 naming the bound past it).
int read_choice_count(const nlohmann::json& body);

// max_tokens and its newer name max_completion_tokens (both integers in [0, INT_MAX]); when both
// are given they must be equal. Empty when neither is.
std::optional<int> read_max_tokens(const nlohmann::json& body);

// stream_options {include_usage}; continuous_usage_stats (vLLM's) true is refused by name.
void read_stream_options(const nlohmann::json& body, bool& include_usage);

// OpenAI fields this server cannot honour are refused by name with a 400 when a value would
// change the answer (audio output, non-text modalities, web search, suffix, the deprecated
// functions/function_call, best_of > 1, echo, verbosity other than "medium"); the ones that do
// not change it (user, metadata, store, service_tier, prediction, prompt_cache_key,
// safety_identifier) are ignored, as the README's "Request fields" table says.
void refuse_unsupported_fields(const nlohmann::json& body, ApiKind kind);

// Formats the events of a request of n choices: one ResponseFormatter per choice, routed by
// ServeEvent::choice. With n = 1 it is exactly the one formatter. With n > 1 a response's choices
// are [0, n) in order, its usage counts the prompt once and sums the completions; a stream carries
// each choice's chunks under its index, the usage once (on the last final chunk, and in the
// include_usage chunk), and [DONE] when every choice has ended. An Error event of any choice ends
// the whole request with that error.
class ChoicesFormatter {
 public:
  ChoicesFormatter(const ApiRequest& request, const Tokenizer& tokenizer, const std::string& id,
                   int64_t created);

  std::string stream_prelude() const;
  std::string stream_event(const ServeEvent& event);
  std::vector<nlohmann::json> prelude_chunks() const;
  std::vector<nlohmann::json> stream_chunks(const ServeEvent& event);
  void collect(const ServeEvent& event);
  nlohmann::json response() const;
  bool finished() const { return finished_; }

 private:
  nlohmann::json usage_json() const;

  std::vector<ResponseFormatter> choices_;
  ApiKind kind_;
  bool include_usage_;
  size_t open_ = 0;  // choices without their Done yet
  bool finished_ = false;
  int64_t prompt_tokens_ = 0, cached_tokens_ = 0, completion_tokens_ = 0;
};

}  // namespace mb::server

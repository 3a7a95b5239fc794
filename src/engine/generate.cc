// SPDX-License-Identifier: MIT
#include "engine/generate.h"

#include <chrono>
#include <utility>

#include "core/error.h"

namespace mb {
namespace {

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

DecodeSettings decode_settings(const GenerateRequest& request) {
  return {request.sampling, request.max_new_tokens, request.stop_strings, request.stop_at_eos,
          request.constraint};
}

// Per-request generation bookkeeping.
struct Active {
  RequestDecoder decoder;
  int32_t unfed = -1;  // the last returned token, not yet consumed by the state
};

}  // namespace

Generator::Generator(const Model& model, const Tokenizer* tokenizer, ComputeContext ctx,
                     int64_t prefill_chunk)
    : model_(model),
      tokenizer_(tokenizer),
      ctx_(ctx),
      prefill_chunk_(prefill_chunk),
      vocabulary_(generation_vocabulary(model.config(), tokenizer)) {}

GenerateResult Generator::generate(const GenerateRequest& request, SequenceState& state,
                                   const StreamCallback& on_token) {
  SequenceState* states[] = {&state};
  return std::move(generate_batch(std::span(&request, 1), states, on_token)[0]);
}

std::vector<GenerateResult> Generator::generate_batch(std::span<const GenerateRequest> requests,
                                                      std::span<SequenceState* const> states,
                                                      const StreamCallback& on_token) {
  const size_t n = requests.size();
  if (states.size() != n) throw Error("generate_batch: one state per request is required");
  for (size_t i = 0; i < n; ++i) {
    try {
      validate_request(requests[i].prompt, decode_settings(requests[i]), vocabulary_, tokenizer_);
    } catch (const Error& e) {
      // Alone, a request is the one the message is about; in a batch it needs naming.
      if (n == 1) throw;
      throw Error("request " + std::to_string(i) + ": " + e.what());
    }
  }

  std::vector<GenerateResult> results(n);
  std::vector<Active> active;
  active.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    active.push_back(
        {RequestDecoder(decode_settings(requests[i]), requests[i].prompt, vocabulary_, tokenizer_)});
    results[i].prompt_tokens = static_cast<int64_t>(requests[i].prompt.size());
  }

  // Prefill every prompt in one pass; only the last position of each reaches the LM head.
  std::vector<SequenceInput> batch;
  for (size_t i = 0; i < n; ++i) batch.push_back({states[i], requests[i].prompt, {}});
  std::vector<std::vector<float>> logits;
  auto start = std::chrono::steady_clock::now();
  model_.forward(ctx_, batch, {OutputKind::LogitsLast, prefill_chunk_}, workspace_, logits);
  const double prefill_seconds = seconds_since(start);
  for (auto& r : results) r.prefill_seconds = prefill_seconds;

  start = std::chrono::steady_clock::now();
  std::vector<size_t> stepping;  // requests still generating, in batch order
  std::vector<int32_t> next_tokens(n);
  std::vector<std::vector<float>> step_logits;
  std::vector<size_t> logits_owner(n);
  for (size_t i = 0; i < n; ++i) logits_owner[i] = i;

  for (;;) {
    stepping.clear();
    for (size_t slot = 0; slot < logits_owner.size(); ++slot) {
      const size_t i = logits_owner[slot];
      Active& a = active[i];
      const DecodeEvent event = a.decoder.on_logits(logits[slot]);
      if (event.token) {
        results[i].tokens.push_back(*event.token);
        results[i].text += event.text;
        a.unfed = *event.token;
        if (on_token && !on_token({i, *event.token, event.text})) a.decoder.cancel();
      }
      if (!a.decoder.done()) stepping.push_back(i);
    }
    if (stepping.empty()) break;
    batch.clear();
    for (size_t i : stepping) {
      next_tokens[i] = active[i].unfed;
      active[i].unfed = -1;
      batch.push_back({states[i], std::span(&next_tokens[i], 1), {}});
    }
    model_.forward(ctx_, batch, {OutputKind::LogitsLast, 0}, workspace_, step_logits);
    std::swap(logits, step_logits);
    logits_owner.assign(stepping.begin(), stepping.end());
  }

  // Consume each request's last returned token so the state covers everything returned.
  batch.clear();
  for (size_t i = 0; i < n; ++i) {
    if (active[i].unfed < 0) continue;
    next_tokens[i] = active[i].unfed;
    batch.push_back({states[i], std::span(&next_tokens[i], 1), {}});
  }
  if (!batch.empty()) model_.forward(ctx_, batch, {OutputKind::None, 0}, workspace_, step_logits);

  const double decode_seconds = seconds_since(start);
  for (size_t i = 0; i < n; ++i) {
    RequestDecoder& decoder = active[i].decoder;
    const std::string tail = decoder.finish();
    if (!tail.empty()) {
      results[i].text += tail;
      if (on_token) on_token({i, -1, tail});
    }
    results[i].stop_reason = decoder.stop_reason();
    results[i].decode_seconds = decode_seconds;
  }
  return results;
}

}  // namespace mb

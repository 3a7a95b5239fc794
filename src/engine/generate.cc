#include "engine/generate.h"

#include <algorithm>
#include <chrono>
#include <memory>
#include <optional>

#include "core/error.h"
#include "engine/stop_strings.h"

namespace mb {
namespace {

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// Per-request generation bookkeeping.
struct Active {
  Sampler sampler;
  std::vector<int32_t> history;  // prompt + generated, for the repetition penalty
  std::optional<StreamDecoder> decoder;
  std::optional<StopStringMatcher> stops;
  bool done = false;
  int32_t unfed = -1;  // the last returned token, not yet consumed by the state
};

}  // namespace

const char* stop_reason_name(StopReason reason) {
  switch (reason) {
    case StopReason::MaxTokens: return "max_tokens";
    case StopReason::Eos: return "eos";
    case StopReason::StopString: return "stop_string";
    case StopReason::Callback: return "callback";
  }
  return "?";
}

Generator::Generator(const Model& model, const Tokenizer* tokenizer, ComputeContext ctx, int64_t prefill_chunk)
    : model_(model), tokenizer_(tokenizer), ctx_(ctx), prefill_chunk_(prefill_chunk) {
  eos_ids_ = model.config().eos_token_ids;
  n_valid_vocab_ = static_cast<int32_t>(model.config().vocab_size);
  if (tokenizer != nullptr) {
    for (int32_t id : tokenizer->eos_token_ids())
      if (std::find(eos_ids_.begin(), eos_ids_.end(), id) == eos_ids_.end()) eos_ids_.push_back(id);
    // Rows past the tokenizer's vocabulary are padding: they are never sampled.
    n_valid_vocab_ = std::min(n_valid_vocab_, tokenizer->vocab_size());
  }
}

GenerateResult Generator::generate(const GenerateRequest& request, SequenceState& state, const StreamCallback& on_token) {
  SequenceState* states[] = {&state};
  return std::move(generate_batch(std::span(&request, 1), states, on_token)[0]);
}

std::vector<GenerateResult> Generator::generate_batch(std::span<const GenerateRequest> requests,
                                                      std::span<SequenceState* const> states,
                                                      const StreamCallback& on_token) {
  const size_t n = requests.size();
  if (states.size() != n) throw Error("generate_batch: one state per request is required");
  for (size_t i = 0; i < n; ++i) {
    const GenerateRequest& r = requests[i];
    if (r.prompt.empty()) throw Error("request " + std::to_string(i) + " has an empty prompt");
    if (r.max_new_tokens < 0) throw Error("max_new_tokens must be >= 0");
    r.sampling.validate();
    if (!r.stop_strings.empty() && tokenizer_ == nullptr)
      throw Error("stop strings need a tokenizer (the model folder has no tokenizer.json)");
    for (int32_t id : r.prompt)
      if (id < 0 || id >= model_.config().vocab_size)
        throw Error("token id " + std::to_string(id) + " is outside the vocabulary [0, " +
                    std::to_string(model_.config().vocab_size) + ")");
  }

  std::vector<GenerateResult> results(n);
  std::vector<std::unique_ptr<Active>> active;
  for (size_t i = 0; i < n; ++i) {
    auto a = std::make_unique<Active>(Active{Sampler(requests[i].sampling, n_valid_vocab_), requests[i].prompt, {}, {}, false, -1});
    if (tokenizer_ != nullptr) a->decoder.emplace(*tokenizer_);
    if (!requests[i].stop_strings.empty()) a->stops.emplace(requests[i].stop_strings);
    results[i].prompt_tokens = static_cast<int64_t>(requests[i].prompt.size());
    active.push_back(std::move(a));
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
  for (size_t i = 0; i < n; ++i)
    if (requests[i].max_new_tokens == 0) active[i]->done = true;

  for (;;) {
    stepping.clear();
    for (size_t slot = 0; slot < logits_owner.size(); ++slot) {
      const size_t i = logits_owner[slot];
      Active& a = *active[i];
      if (a.done) continue;
      const int32_t token = a.sampler.sample(logits[slot], a.history);
      GenerateResult& result = results[i];
      if (requests[i].stop_at_eos && std::find(eos_ids_.begin(), eos_ids_.end(), token) != eos_ids_.end()) {
        result.stop_reason = StopReason::Eos;
        a.done = true;
        continue;
      }
      result.tokens.push_back(token);
      a.history.push_back(token);
      a.unfed = token;
      std::string piece = a.decoder ? a.decoder->push(token) : std::string();
      if (a.stops) piece = a.stops->push(piece);
      result.text += piece;
      if (on_token && !on_token({i, token, piece})) {
        result.stop_reason = StopReason::Callback;
        a.done = true;
      } else if (a.stops && a.stops->stopped()) {
        result.stop_reason = StopReason::StopString;
        a.done = true;
      } else if (static_cast<int>(result.tokens.size()) >= requests[i].max_new_tokens) {
        result.stop_reason = StopReason::MaxTokens;
        a.done = true;
      }
      if (!a.done) stepping.push_back(i);
    }
    if (stepping.empty()) break;
    batch.clear();
    for (size_t i : stepping) {
      next_tokens[i] = active[i]->unfed;
      active[i]->unfed = -1;
      batch.push_back({states[i], std::span(&next_tokens[i], 1), {}});
    }
    model_.forward(ctx_, batch, {OutputKind::LogitsLast, 0}, workspace_, step_logits);
    std::swap(logits, step_logits);
    logits_owner.assign(stepping.begin(), stepping.end());
  }

  // Consume each request's last returned token so the state covers everything returned.
  batch.clear();
  for (size_t i = 0; i < n; ++i) {
    if (active[i]->unfed < 0) continue;
    next_tokens[i] = active[i]->unfed;
    batch.push_back({states[i], std::span(&next_tokens[i], 1), {}});
  }
  if (!batch.empty()) model_.forward(ctx_, batch, {OutputKind::None, 0}, workspace_, step_logits);

  const double decode_seconds = seconds_since(start);
  for (size_t i = 0; i < n; ++i) {
    Active& a = *active[i];
    std::string tail = a.decoder ? a.decoder->finish() : std::string();
    if (a.stops) tail = a.stops->stopped() ? std::string() : a.stops->push(tail) + a.stops->flush();
    if (!tail.empty()) {
      results[i].text += tail;
      if (on_token) on_token({i, -1, tail});
    }
    results[i].decode_seconds = decode_seconds;
  }
  return results;
}

}  // namespace mb

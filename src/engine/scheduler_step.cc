// SPDX-License-Identifier: MIT
// One step of the scheduler loop: intake of cancellations and new requests, the batch of decode
// rows and prefill chunks, one forward call, then sampling and events.
#include <algorithm>

#include "engine/scheduler_impl.h"

namespace mb {

using scheduler_detail::Clock;
using scheduler_detail::kRecentSteps;
using scheduler_detail::Phase;

bool Scheduler::Impl::step() {
  const Clock::time_point start = Clock::now();
  std::vector<Pending> cancelled_waiting, admitted;
  std::deque<std::packaged_task<void()>> work;
  {
    std::lock_guard lock(mutex);
    work.swap(tasks);
    for (RequestId id : cancels) {
      auto it = std::find_if(waiting.begin(), waiting.end(), [id](const Pending& p) { return p.id == id; });
      if (it != waiting.end()) {
        cancelled_waiting.push_back(std::move(*it));
        waiting.erase(it);
        continue;
      }
      for (auto& seq : active)
        if (seq->id == id) seq->cancel_requested = true;
    }
    cancels.clear();
  }
  bool busy = !work.empty() || !cancelled_waiting.empty() || !active.empty();
  for (auto& task : work) task();

  for (Pending& p : cancelled_waiting) {
    ServeEvent done;
    done.kind = ServeEvent::Kind::Done;
    done.stop_reason = StopReason::Callback;
    done.prompt_tokens = static_cast<int64_t>(p.request.prompt.size());
    // Every choice ends, so a receiver waiting for each choice's Done is not left waiting.
    for (done.choice = 0; done.choice < p.request.n; ++done.choice) {
      try {
        if (!p.sink(done)) break;
      } catch (...) {
        break;
      }
    }
    ++loop_stats.requests_cancelled;
  }
  for (auto& seq : active)
    if (seq->cancel_requested && seq->phase != Phase::Finishing) {
      seq->decoder.cancel();
      finish(*seq);
    }

  // Slots freed by the cancellations above are filled in this same step. A request that continues
  // a conversation whose previous turn is finishing waits one step, until that turn's state is
  // cached: a client that sends the next turn as soon as it has the answer then resumes from it
  // rather than from an older entry. The queue keeps its order.
  const auto continues_a_finishing_turn = [this](const Pending& p) {
    for (const auto& seq : active) {
      if (seq->phase != Phase::Finishing || seq->retired) continue;
      const std::span<const int32_t> history = seq->decoder.history();
      if (history.size() <= p.request.prompt.size() &&
          std::equal(history.begin(), history.end(), p.request.prompt.begin()))
        return true;
    }
    return false;
  };
  {
    std::lock_guard lock(mutex);
    int in_flight = 0;
    for (const auto& seq : active)
      if (seq->phase != Phase::Finishing && !seq->retired) in_flight += slots_held(*seq);
    // A request of n choices waits for n free slots, or for an idle scheduler when n exceeds them.
    while (!waiting.empty() &&
           (in_flight == 0 || in_flight + waiting.front().request.n <= options.max_active) &&
           !continues_a_finishing_turn(waiting.front())) {
      in_flight += waiting.front().request.n;
      admitted.push_back(std::move(waiting.front()));
      waiting.pop_front();
    }
  }
  busy = busy || !admitted.empty();
  for (Pending& p : admitted) admit(std::move(p));
  std::erase_if(active, [](const auto& seq) { return seq->retired; });

  build_batch();
  int64_t rows = 0;
  if (!batch.empty()) {
    for (const SequenceInput& input : batch) rows += static_cast<int64_t>(input.tokens.size());
    // One call with LogitsLast for every row: the LM head then runs once per sequence, on its
    // last new position only, so a mid-prompt chunk or a finishing row costs one wasted row of
    // it, while splitting state-only rows into a second call (OutputKind::None) would stream
    // every layer's weights twice per step.
    try {
      model.forward(ctx, batch, {OutputKind::LogitsLast, 0}, workspace, outputs);
    } catch (const std::exception& e) {
      for (Sequence* seq : batch_owner) {
        if (seq->phase == Phase::Finishing)
          seq->retired = true;  // already reported: only its cache entry is lost
        else
          fail(*seq, std::string("forward pass failed: ") + e.what(), false);
      }
      batch_owner.clear();
    }
    for (size_t i = 0; i < batch_owner.size(); ++i) after_forward(*batch_owner[i], outputs[i]);
    std::erase_if(active, [](const auto& seq) { return seq->retired; });
  }
  if (!busy) return false;
  publish_metrics(std::chrono::duration<double>(Clock::now() - start).count(), rows);
  return true;
}

void Scheduler::Impl::admit(Pending p) {
  loop_stats.prompt_tokens += p.request.prompt.size();
  try {
    RequestDecoder decoder(scheduler_detail::decode_settings(p.request), p.request.prompt, vocabulary,
                           tokenizer);
    // A fresh state is made only when nothing is cached: a resumed one is a copy of the cached
    // state, and zero-filling megabytes first would only be thrown away.
    SequenceState state;
    // The first token is chosen by the logits of the prompt's last position: a cached prefix
    // shorter than the prompt leaves at least that position to prefill, and one covering the whole
    // prompt (a repeated request) comes with the logits row it was cached with.
    std::vector<float> logits;
    size_t cached = cache.lookup_resumable(p.request.prompt, state, logits);
    // A prefix stored by another replica (or before a restart) can beat the in-memory one. A stored
    // state has no logits row, so at least the prompt's last position is left to prefill.
    if (store && logits.empty() && cached + 1 < p.request.prompt.size()) {
      if (std::optional<SlotFile> slot =
              store->find_longest(p.request.prompt, cached + 1, p.request.prompt.size() - 1)) {
        cached = slot->tokens.size();
        state = std::move(slot->state);
        cache.put(slot->tokens, state);
        loop_stats.stored_prompt_tokens += cached;
      }
    }
    if (state.empty()) state = model.new_state();
    active.push_back(std::make_unique<Sequence>(
        Sequence{p.id, std::move(p.request), std::move(p.sink), std::move(state), std::move(decoder)}));
    Sequence& seq = *active.back();
    seq.cached = static_cast<int64_t>(cached);
    loop_stats.cached_prompt_tokens += cached;
    if (!logits.empty()) start_decoding(seq, logits);
  } catch (const std::exception& e) {
    ServeEvent error;
    error.kind = ServeEvent::Kind::Error;
    error.error = e.what();
    try {
      if (p.sink) p.sink(error);
    } catch (...) {
    }
    ++loop_stats.requests_failed;
  }
}

void Scheduler::Impl::build_batch() {
  batch.clear();
  batch_owner.clear();
  int64_t used = 0;
  // Decode and finishing rows first: one position each, whatever the budget.
  for (auto& seq : active) {
    if (seq->phase == Phase::Prefill) continue;
    batch.push_back({&seq->state, std::span(&seq->unfed, 1), {}});
    batch_owner.push_back(seq.get());
    ++used;
  }
  // Then prompt chunks, oldest request first, up to the budget. The oldest always gets at least
  // one position, so decode rows filling the budget cannot starve a prompt forever. A chunk
  // never crosses a multiple of cache_every, where the state is cached.
  bool first = true;
  for (auto& seq : active) {
    if (seq->phase != Phase::Prefill) continue;
    const int64_t position = seq->state.position;
    const std::span<const int32_t> history = seq->decoder.history();
    int64_t chunk =
        std::min(static_cast<int64_t>(history.size()) - position, options.step_token_budget - used);
    if (options.cache_every > 0)
      chunk = std::min(chunk, (position / options.cache_every + 1) * options.cache_every - position);
    if (first) chunk = std::max<int64_t>(chunk, 1);
    first = false;
    if (chunk <= 0) break;
    batch.push_back(
        {&seq->state, history.subspan(static_cast<size_t>(position), static_cast<size_t>(chunk)), {}});
    batch_owner.push_back(seq.get());
    used += chunk;
  }
}

void Scheduler::Impl::after_forward(Sequence& seq, std::span<const float> logits) {
  if (seq.retired) return;
  switch (seq.phase) {
    case Phase::Finishing:
      seq.unfed = -1;
      release(seq, logits);
      return;
    case Phase::Decode:
      seq.unfed = -1;
      sample_next(seq, logits);
      return;
    case Phase::Prefill: {
      const int64_t position = seq.state.position;
      if (position < static_cast<int64_t>(seq.request.prompt.size())) {
        if (options.cache_every > 0 && position % options.cache_every == 0)
          cache.put(seq.decoder.history().first(static_cast<size_t>(position)), seq.state, logits);
        return;
      }
      // The first token goes out before the state is copied into the cache: the copy (megabytes)
      // would otherwise be part of the client's time to the first token. The state is still the
      // prompt's: the sampled token is fed in the next step.
      start_decoding(seq, logits);
      // The whole prompt is cached too: the next turn of a chat re-renders this prompt as its
      // prefix, while the generated reply usually re-tokenizes differently, so this entry is the
      // one a follow-up turn resumes from; its logits serve the same prompt sent again. (A
      // sequence that ended on an EOS has been released and cached without the logits row: this
      // adds it.)
      const std::span<const int32_t> prompt = seq.decoder.history().first(static_cast<size_t>(position));
      cache.put(prompt, seq.state, logits);
      if (store && !seq.retired) store->save(prompt, seq.state);
      return;
    }
  }
}

void Scheduler::Impl::sample_next(Sequence& seq, std::span<const float> logits) {
  try {
    DecodeEvent decoded = seq.decoder.on_logits(logits);
    if (!decoded.token) {  // an EOS id, or max_tokens 0: nothing to report but the end
      finish(seq);
      return;
    }
    ServeEvent event;
    event.token = *decoded.token;
    if (seq.request.logprobs || seq.request.n_probs > 0) {
      TokenLogprobs probs = token_logprobs(seq.decoder.sampler(), logits, event.token, seq.request.n_probs,
                                           seq.request.post_sampling_probs);
      event.logprob = probs.logprob;
      event.top = std::move(probs.top);
    }
    seq.unfed = event.token;
    ++loop_stats.generated_tokens;
    event.text = std::move(decoded.text);
    if (!deliver(seq, event)) {
      // The receiver is gone: no more events, but the state is still worth caching. The
      // request's other choices go too, at the next step.
      seq.decoder.cancel();
      if (seq.choice == 0) ++loop_stats.requests_cancelled;
      seq.phase = Phase::Finishing;
      for (auto& other : active)
        if (other->id == seq.id && other.get() != &seq) other->cancel_requested = true;
      return;
    }
    if (decoded.done) finish(seq);
  } catch (const std::exception& e) {
    fail(seq, e.what(), false);
  }
}

void Scheduler::Impl::finish(Sequence& seq) {
  const StopReason reason = seq.decoder.stop_reason();
  ServeEvent done;
  done.kind = ServeEvent::Kind::Done;
  done.stop_reason = reason;
  if (reason == StopReason::StopString) done.stop_string = seq.decoder.matched_stop();
  done.prompt_tokens = static_cast<int64_t>(seq.request.prompt.size());
  done.cached_tokens = seq.cached;
  done.completion_tokens = seq.decoder.generated();
  done.text = seq.decoder.finish();
  deliver(seq, done);
  // A request is counted once, by its first choice.
  if (seq.choice == 0)
    ++(reason == StopReason::Callback ? loop_stats.requests_cancelled : loop_stats.requests_finished);
  // A request still in its prompt, or whose last token was EOS (never fed), is cached as it is;
  // otherwise the next step's row consumes the last token first.
  if (seq.phase == Phase::Decode && seq.unfed >= 0)
    seq.phase = Phase::Finishing;
  else
    release(seq);
}

void Scheduler::Impl::release(Sequence& seq, std::span<const float> logits) {
  if (seq.state.position > 0) {
    const std::span<const int32_t> consumed =
        seq.decoder.history().first(static_cast<size_t>(seq.state.position));
    cache.put(consumed, seq.state, logits);
    if (store) store->save(consumed, seq.state);
  }
  seq.retired = true;
}

void Scheduler::Impl::fail(Sequence& seq, const std::string& message, bool cancelled) {
  ServeEvent error;
  error.kind = ServeEvent::Kind::Error;
  error.error = message;
  deliver(seq, error);
  // A request is counted once, by its first choice.
  if (seq.choice == 0) ++(cancelled ? loop_stats.requests_cancelled : loop_stats.requests_failed);
  seq.retired = true;
}

void Scheduler::Impl::fail_everything(const std::string& message) {
  std::deque<Pending> left;
  {
    std::lock_guard lock(mutex);
    left.swap(waiting);
    cancels.clear();
  }
  ServeEvent error;
  error.kind = ServeEvent::Kind::Error;
  error.error = message;
  for (Pending& p : left) {
    try {
      p.sink(error);
    } catch (...) {
    }
    ++loop_stats.requests_cancelled;
  }
  for (auto& seq : active) {
    if (seq->phase == Phase::Finishing)
      seq->retired = true;  // already reported
    else
      fail(*seq, message, true);
  }
  active.clear();
  publish_metrics(0, 0);
}

bool Scheduler::Impl::deliver(Sequence& seq, ServeEvent& event) {
  event.choice = seq.choice;
  try {
    return seq.sink(event);
  } catch (...) {
    return false;
  }
}

void Scheduler::Impl::publish_metrics(double seconds, int64_t rows) {
  // A step is counted when it ran the model; intake-only steps (a cancellation, slot work) are not.
  if (rows > 0) {
    ++loop_stats.steps;
    loop_stats.step_seconds_sum += seconds;
    loop_stats.step_rows += static_cast<uint64_t>(rows);
  }
  loop_stats.active = active.size();
  loop_stats.cache_entries = cache.entries();
  loop_stats.cache_bytes = cache.bytes();
  loop_stats.cache_hits = cache.hits();
  loop_stats.cache_misses = cache.misses();
  std::lock_guard lock(mutex);
  published = loop_stats;
  if (rows > 0) {
    if (recent_steps.size() < kRecentSteps)
      recent_steps.push_back(seconds);
    else
      recent_steps[recent_next] = seconds;
    recent_next = (recent_next + 1) % kRecentSteps;
  }
}

}  // namespace mb

#include "engine/scheduler.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <deque>
#include <functional>
#include <future>
#include <limits>
#include <mutex>
#include <optional>
#include <thread>

#include "engine/prefix_cache.h"
#include "engine/slot_file.h"
#include "engine/stop_strings.h"

namespace mb {
namespace {

using Clock = std::chrono::steady_clock;

// Step durations kept for the quantiles in metrics().
constexpr size_t kRecentSteps = 1024;

struct Pending {
  RequestId id;
  ServeRequest request;
  ServeSink sink;
};

enum class Phase {
  Prefill,    // consuming the prompt; the state has consumed history[0, state.position)
  Decode,     // the last generated token (unfed) goes in with the next step's row
  Finishing,  // done and reported; one state-only row consumes the last token before caching
};

// A request in a slot. Only the scheduler thread touches it.
struct Sequence {
  RequestId id;
  ServeRequest request;
  ServeSink sink;
  SequenceState state;
  Sampler sampler;
  std::vector<int32_t> history;  // prompt + generated tokens, for the repetition penalty and the cache
  std::optional<StreamDecoder> decoder;
  std::optional<StopStringMatcher> stops;
  Phase phase = Phase::Prefill;
  int64_t cached = 0;     // prompt tokens resumed from the prefix cache
  int64_t generated = 0;  // tokens reported so far
  int32_t unfed = -1;     // the last generated token, not yet consumed by the state
  bool cancel_requested = false;
  bool retired = false;  // leaves the slot at the end of this step
  int64_t rows = 0;      // positions in this step's batch
};

bool is_valid_slot_name(const std::string& name) {
  if (name.empty() || name.size() > 255 || name[0] == '.') return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
           c == '_' || c == '-';
  });
}

double quantile(std::vector<double> values, double q) {
  const size_t at = std::min(values.size() - 1, static_cast<size_t>(q * static_cast<double>(values.size())));
  std::nth_element(values.begin(), values.begin() + static_cast<ptrdiff_t>(at), values.end());
  return values[at];
}

}  // namespace

TokenLogprobs token_logprobs(const Sampler& sampler, std::span<const float> logits, int32_t token,
                             int n_probs, bool post_sampling) {
  TokenLogprobs result;
  if (post_sampling) {
    std::vector<SampleCandidate> candidates(sampler.last_distribution().begin(),
                                            sampler.last_distribution().end());
    result.logprob = -std::numeric_limits<float>::infinity();
    for (const SampleCandidate& c : candidates)
      if (c.id == token) result.logprob = static_cast<float>(std::log(c.probability));
    const size_t n = std::min(candidates.size(), static_cast<size_t>(std::max(n_probs, 0)));
    std::partial_sort(candidates.begin(), candidates.begin() + static_cast<ptrdiff_t>(n), candidates.end(),
                      [](const SampleCandidate& a, const SampleCandidate& b) {
                        return a.probability != b.probability ? a.probability > b.probability : a.id < b.id;
                      });
    for (size_t i = 0; i < n; ++i)
      result.top.push_back({candidates[i].id, static_cast<float>(std::log(candidates[i].probability))});
    return result;
  }

  // log-softmax of the raw logits in double precision, summed in id order. NaN counts as -inf,
  // as in the sampler; with an infinite maximum the mass goes evenly to the tokens at it.
  const size_t vocab = static_cast<size_t>(sampler.n_valid_vocab());
  auto logit_of = [&](size_t id) {
    const float value = logits[id];
    return std::isnan(value) ? -std::numeric_limits<double>::infinity() : static_cast<double>(value);
  };
  double max_logit = -std::numeric_limits<double>::infinity();
  for (size_t id = 0; id < vocab; ++id) max_logit = std::max(max_logit, logit_of(id));
  std::function<double(size_t)> logprob_of;
  if (std::isfinite(max_logit)) {
    double sum = 0.0;
    for (size_t id = 0; id < vocab; ++id) sum += std::exp(logit_of(id) - max_logit);
    const double log_sum = std::log(sum);
    logprob_of = [&, log_sum](size_t id) { return (logit_of(id) - max_logit) - log_sum; };
  } else {
    size_t at_max = 0;
    for (size_t id = 0; id < vocab; ++id) at_max += logit_of(id) == max_logit;
    const double share = -std::log(static_cast<double>(at_max));
    logprob_of = [&, share](size_t id) {
      return logit_of(id) == max_logit ? share : -std::numeric_limits<double>::infinity();
    };
  }
  result.logprob = static_cast<float>(logprob_of(static_cast<size_t>(token)));
  const size_t n = std::min(vocab, static_cast<size_t>(std::max(n_probs, 0)));
  if (n > 0) {
    std::vector<int32_t> ids(vocab);
    for (size_t id = 0; id < vocab; ++id) ids[id] = static_cast<int32_t>(id);
    std::partial_sort(
        ids.begin(), ids.begin() + static_cast<ptrdiff_t>(n), ids.end(), [&](int32_t a, int32_t b) {
          const double la = logit_of(static_cast<size_t>(a)), lb = logit_of(static_cast<size_t>(b));
          return la != lb ? la > lb : a < b;
        });
    for (size_t i = 0; i < n; ++i)
      result.top.push_back({ids[i], static_cast<float>(logprob_of(static_cast<size_t>(ids[i])))});
  }
  return result;
}

struct Scheduler::Impl {
  Impl(const Model& m, const Tokenizer* t, ComputeContext c, SchedulerOptions o)
      : model(m), tokenizer(t), ctx(c), options(std::move(o)), cache(options.cache_bytes) {}

  // Scheduler thread.
  bool step();
  void admit(Pending pending);
  void build_batch();
  void after_forward(Sequence& seq, std::span<const float> logits);
  void sample_next(Sequence& seq, std::span<const float> logits);
  void finish(Sequence& seq, StopReason reason);
  void release(Sequence& seq);
  void fail(Sequence& seq, const std::string& message, bool cancelled);
  void fail_everything(const std::string& message);
  bool deliver(Sequence& seq, const ServeEvent& event);
  void run_loop();
  SequenceState state_for_prefix(std::span<const int32_t> prefix);
  void publish_metrics(double seconds, int64_t rows);

  // Runs `work` on the scheduler thread between steps (or here, under loop_mutex, when no
  // background thread runs) and waits for it; exceptions reach the caller.
  void run_on_loop(std::function<void()> work);

  const Model& model;
  const Tokenizer* tokenizer;
  ComputeContext ctx;
  SchedulerOptions options;
  std::vector<int32_t> eos_ids;
  int32_t n_valid_vocab = 0;

  // Owned by the scheduler thread.
  Workspace workspace;
  PrefixStateCache cache;
  std::vector<std::unique_ptr<Sequence>> active;  // in admission order
  std::vector<SequenceInput> batch;
  std::vector<Sequence*> batch_owner;
  std::vector<std::vector<float>> outputs;
  SchedulerMetrics loop_stats;  // the counters only the scheduler thread changes
  std::mutex loop_mutex;        // held by whoever runs a step or slot work

  // Shared, under `mutex`.
  mutable std::mutex mutex;
  std::condition_variable wake;
  std::deque<Pending> waiting;
  std::vector<RequestId> cancels;
  std::deque<std::packaged_task<void()>> tasks;
  RequestId next_id = 1;
  uint64_t submitted = 0;
  bool stopping = false, drain = false, running = false, stopped = false;
  SchedulerMetrics published;
  std::vector<double> recent_steps;
  size_t recent_next = 0;
  std::thread thread;
};

Scheduler::Scheduler(const Model& model, const Tokenizer* tokenizer, ComputeContext ctx,
                     SchedulerOptions options) {
  check_thread_count(ctx.n_threads);
  if (options.max_active < 1)
    throw Error("max_active must be >= 1, got " + std::to_string(options.max_active));
  if (options.step_token_budget < 1)
    throw Error("step_token_budget must be >= 1, got " + std::to_string(options.step_token_budget));
  if (options.max_waiting < 1) throw Error("max_waiting must be >= 1, got 0");
  if (options.max_context < 0)
    throw Error("max_context must be >= 0, got " + std::to_string(options.max_context));
  if (options.cache_every < 0)
    throw Error("cache_every must be >= 0, got " + std::to_string(options.cache_every));
  impl_ = std::make_unique<Impl>(model, tokenizer, ctx, std::move(options));
  // The same end-of-text ids and valid vocabulary as Generator, so served requests match it.
  Impl& s = *impl_;
  s.eos_ids = model.config().eos_token_ids;
  s.n_valid_vocab = static_cast<int32_t>(model.config().vocab_size);
  if (tokenizer != nullptr) {
    for (int32_t id : tokenizer->eos_token_ids())
      if (std::find(s.eos_ids.begin(), s.eos_ids.end(), id) == s.eos_ids.end()) s.eos_ids.push_back(id);
    s.n_valid_vocab = std::min(s.n_valid_vocab, tokenizer->vocab_size());
  }
}

Scheduler::~Scheduler() {
  bool stopped;
  {
    std::lock_guard lock(impl_->mutex);
    stopped = impl_->stopped;
  }
  if (!stopped) stop(false);
}

const std::vector<int32_t>& Scheduler::eos_ids() const {
  return impl_->eos_ids;
}

RequestId Scheduler::submit(ServeRequest request, ServeSink sink) {
  Impl& s = *impl_;
  if (!sink) throw Error("submit needs a sink for the request's events");
  if (request.prompt.empty()) throw Error("the prompt is empty (a request needs at least one token)");
  for (size_t i = 0; i < request.prompt.size(); ++i) {
    const int32_t id = request.prompt[i];
    if (id < 0 || id >= s.n_valid_vocab)
      throw Error("prompt token " + std::to_string(id) + " at position " + std::to_string(i) +
                  " is outside the vocabulary [0, " + std::to_string(s.n_valid_vocab) + ")");
  }
  if (request.max_tokens < 0)
    throw Error("max_tokens must be >= 0, got " + std::to_string(request.max_tokens));
  if (request.n_probs < 0 || request.n_probs > kMaxProbs)
    throw Error("n_probs must be in [0, " + std::to_string(kMaxProbs) + "], got " +
                std::to_string(request.n_probs));
  request.sampling.validate();
  if (!request.stop.empty()) {
    if (s.tokenizer == nullptr)
      throw Error("stop strings need a tokenizer (the model folder has no tokenizer.json)");
    StopStringMatcher check(request.stop);  // throws for an empty stop string
  }
  const int64_t needed = static_cast<int64_t>(request.prompt.size()) + request.max_tokens;
  if (s.options.max_context > 0 && needed > s.options.max_context)
    throw Error("the prompt (" + std::to_string(request.prompt.size()) + " tokens) plus max_tokens (" +
                std::to_string(request.max_tokens) + ") exceeds the context limit of " +
                std::to_string(s.options.max_context) + " tokens");

  std::lock_guard lock(s.mutex);
  if (s.stopping) throw Error("the scheduler is stopping and accepts no new requests");
  if (s.waiting.size() >= s.options.max_waiting)
    throw QueueFull("the queue is full (" + std::to_string(s.waiting.size()) + " requests waiting)");
  const RequestId id = s.next_id++;
  s.waiting.push_back({id, std::move(request), std::move(sink)});
  ++s.submitted;
  s.wake.notify_all();
  return id;
}

void Scheduler::cancel(RequestId id) {
  std::lock_guard lock(impl_->mutex);
  impl_->cancels.push_back(id);
  impl_->wake.notify_all();
}

bool Scheduler::step() {
  std::lock_guard loop(impl_->loop_mutex);
  return impl_->step();
}

void Scheduler::start() {
  Impl& s = *impl_;
  std::lock_guard lock(s.mutex);
  if (s.running || s.stopping) throw Error("the scheduler was already started or stopped");
  s.running = true;
  s.thread = std::thread([&s] { s.run_loop(); });
}

void Scheduler::stop(bool drain) {
  Impl& s = *impl_;
  {
    std::lock_guard lock(s.mutex);
    if (s.stopped) return;
    s.stopping = true;
    s.drain = drain;
    s.wake.notify_all();
  }
  if (s.thread.joinable()) {
    s.thread.join();
  } else {
    std::lock_guard loop(s.loop_mutex);
    if (drain)
      while (s.step()) {
      }
    else
      s.fail_everything("the server stopped before the request finished");
  }
  std::lock_guard lock(s.mutex);
  s.stopped = true;
}

SchedulerMetrics Scheduler::metrics() const {
  const Impl& s = *impl_;
  std::lock_guard lock(s.mutex);
  SchedulerMetrics m = s.published;
  m.requests_submitted = s.submitted;
  m.waiting = s.waiting.size();
  if (!s.recent_steps.empty())
    m.step_seconds_quantiles = {quantile(s.recent_steps, 0.5), quantile(s.recent_steps, 0.9),
                                quantile(s.recent_steps, 0.99)};
  return m;
}

void Scheduler::save_prefix(const std::string& name, std::span<const int32_t> prefix) {
  Impl& s = *impl_;
  if (s.options.slot_save_path.empty()) throw Error("slot saving is disabled (no slot save path was given)");
  if (!is_valid_slot_name(name))
    throw Error("invalid slot name '" + name +
                "': use letters, digits, '.', '_' and '-', not starting with '.'");
  if (prefix.empty()) throw Error("cannot save an empty prefix");
  for (size_t i = 0; i < prefix.size(); ++i)
    if (prefix[i] < 0 || prefix[i] >= s.n_valid_vocab)
      throw Error("prefix token " + std::to_string(prefix[i]) + " at position " + std::to_string(i) +
                  " is outside the vocabulary [0, " + std::to_string(s.n_valid_vocab) + ")");
  const std::vector<int32_t> tokens(prefix.begin(), prefix.end());
  SequenceState state;
  s.run_on_loop([&] { state = s.state_for_prefix(tokens); });
  // The file is written on this thread, so the scheduler thread never waits for the disk.
  save_slot_file(s.options.slot_save_path + "/" + name, s.model, tokens, state);
}

size_t Scheduler::restore_prefix(const std::string& name) {
  Impl& s = *impl_;
  if (s.options.slot_save_path.empty()) throw Error("slot saving is disabled (no slot save path was given)");
  if (!is_valid_slot_name(name))
    throw Error("invalid slot name '" + name +
                "': use letters, digits, '.', '_' and '-', not starting with '.'");
  SlotFile slot = load_slot_file(s.options.slot_save_path + "/" + name, s.model);
  for (size_t i = 0; i < slot.tokens.size(); ++i)
    if (slot.tokens[i] >= s.n_valid_vocab)
      throw Error("slot '" + name + "': token " + std::to_string(slot.tokens[i]) +
                  " is outside the tokenizer's vocabulary");
  const size_t bytes = (slot.tokens.size() + slot.state.values.size()) * sizeof(float);
  if (bytes > s.cache.budget_bytes())
    throw Error("slot '" + name + "' needs " + std::to_string(bytes) +
                " bytes but the prefix cache holds at most " + std::to_string(s.cache.budget_bytes()));
  s.run_on_loop([&] { s.cache.put(slot.tokens, slot.state); });
  return slot.tokens.size();
}

void Scheduler::Impl::run_on_loop(std::function<void()> work) {
  std::packaged_task<void()> task(std::move(work));
  std::future<void> done = task.get_future();
  bool queued = false;
  {
    std::lock_guard lock(mutex);
    if (running) {
      tasks.push_back(std::move(task));
      wake.notify_all();
      queued = true;
    }
  }
  if (!queued) {
    std::lock_guard loop(loop_mutex);
    task();
  }
  done.get();
}

SequenceState Scheduler::Impl::state_for_prefix(std::span<const int32_t> prefix) {
  SequenceState state = model.new_state();
  const size_t cached = cache.lookup(prefix, state, prefix.size());
  if (cached < prefix.size()) {
    const SequenceInput input{&state, prefix.subspan(cached), {}};
    model.forward(ctx, std::span(&input, 1), {OutputKind::None, options.step_token_budget}, workspace,
                  outputs);
    cache.put(prefix, state);
  }
  return state;
}

void Scheduler::Impl::run_loop() {
  for (;;) {
    {
      std::unique_lock lock(mutex);
      wake.wait(lock, [&] {
        return stopping || !waiting.empty() || !cancels.empty() || !tasks.empty() || !active.empty();
      });
      if (stopping && !drain) break;
      if (stopping && waiting.empty() && tasks.empty() && active.empty()) break;
    }
    std::lock_guard loop(loop_mutex);
    step();
  }
  std::lock_guard loop(loop_mutex);
  if (!drain) fail_everything("the server stopped before the request finished");
  // Slot work queued while the loop was ending still runs, so no caller waits forever.
  std::deque<std::packaged_task<void()>> left;
  {
    std::lock_guard lock(mutex);
    running = false;
    left.swap(tasks);
  }
  for (auto& task : left) task();
}

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
    try {
      p.sink(done);
    } catch (...) {
    }
    ++loop_stats.requests_cancelled;
  }
  for (auto& seq : active)
    if (seq->cancel_requested && seq->phase != Phase::Finishing) finish(*seq, StopReason::Callback);

  // Slots freed by the cancellations above are filled in this same step.
  {
    std::unique_lock lock(mutex);
    int in_flight = 0;
    for (const auto& seq : active) in_flight += seq->phase != Phase::Finishing && !seq->retired;
    while (in_flight < options.max_active && !waiting.empty()) {
      admitted.push_back(std::move(waiting.front()));
      waiting.pop_front();
      ++in_flight;
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
      for (Sequence* seq : batch_owner) fail(*seq, std::string("forward pass failed: ") + e.what(), false);
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
    Sampler sampler(p.request.sampling, n_valid_vocab);
    std::optional<StreamDecoder> decoder;
    if (tokenizer != nullptr) decoder.emplace(*tokenizer);
    std::optional<StopStringMatcher> stops;
    if (!p.request.stop.empty()) stops.emplace(p.request.stop);
    SequenceState state = model.new_state();
    // At least one prompt token is left to prefill: its logits choose the first token.
    const size_t cached = cache.lookup(p.request.prompt, state, p.request.prompt.size() - 1);
    std::vector<int32_t> history = p.request.prompt;
    active.push_back(std::make_unique<Sequence>(
        Sequence{p.id, std::move(p.request), std::move(p.sink), std::move(state), std::move(sampler),
                 std::move(history), std::move(decoder), std::move(stops)}));
    active.back()->cached = static_cast<int64_t>(cached);
    loop_stats.cached_prompt_tokens += cached;
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
    seq->rows = 0;
    if (seq->phase == Phase::Prefill) continue;
    seq->rows = 1;
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
    int64_t chunk =
        std::min(static_cast<int64_t>(seq->history.size()) - position, options.step_token_budget - used);
    if (options.cache_every > 0)
      chunk = std::min(chunk, (position / options.cache_every + 1) * options.cache_every - position);
    if (first) chunk = std::max<int64_t>(chunk, 1);
    first = false;
    if (chunk <= 0) break;
    seq->rows = chunk;
    batch.push_back(
        {&seq->state,
         std::span(seq->history).subspan(static_cast<size_t>(position), static_cast<size_t>(chunk)),
         {}});
    batch_owner.push_back(seq.get());
    used += chunk;
  }
}

void Scheduler::Impl::after_forward(Sequence& seq, std::span<const float> logits) {
  if (seq.retired) return;
  switch (seq.phase) {
    case Phase::Finishing:
      seq.unfed = -1;
      release(seq);
      return;
    case Phase::Decode:
      seq.unfed = -1;
      sample_next(seq, logits);
      return;
    case Phase::Prefill: {
      const int64_t position = seq.state.position;
      if (position < static_cast<int64_t>(seq.request.prompt.size())) {
        if (options.cache_every > 0 && position % options.cache_every == 0)
          cache.put(std::span(seq.history).first(static_cast<size_t>(position)), seq.state);
        return;
      }
      seq.phase = Phase::Decode;
      if (seq.request.max_tokens == 0) {
        finish(seq, StopReason::MaxTokens);
        return;
      }
      sample_next(seq, logits);
      return;
    }
  }
}

void Scheduler::Impl::sample_next(Sequence& seq, std::span<const float> logits) {
  try {
    const int32_t token = seq.sampler.sample(logits, seq.history);
    if (seq.request.stop_at_eos && std::find(eos_ids.begin(), eos_ids.end(), token) != eos_ids.end()) {
      finish(seq, StopReason::Eos);
      return;
    }
    ServeEvent event;
    event.token = token;
    const TokenLogprobs probs =
        token_logprobs(seq.sampler, logits, token, seq.request.n_probs, seq.request.post_sampling_probs);
    event.logprob = probs.logprob;
    event.top = probs.top;
    seq.history.push_back(token);
    seq.unfed = token;
    ++seq.generated;
    ++loop_stats.generated_tokens;
    std::string piece = seq.decoder ? seq.decoder->push(token) : std::string();
    if (seq.stops) piece = seq.stops->push(piece);
    event.text = std::move(piece);
    if (!deliver(seq, event)) {
      // The receiver is gone: no more events, but the state is still worth caching.
      ++loop_stats.requests_cancelled;
      seq.phase = Phase::Finishing;
      return;
    }
    if (seq.stops && seq.stops->stopped())
      finish(seq, StopReason::StopString);
    else if (seq.generated >= seq.request.max_tokens)
      finish(seq, StopReason::MaxTokens);
  } catch (const std::exception& e) {
    fail(seq, e.what(), false);
  }
}

void Scheduler::Impl::finish(Sequence& seq, StopReason reason) {
  ServeEvent done;
  done.kind = ServeEvent::Kind::Done;
  done.stop_reason = reason;
  done.prompt_tokens = static_cast<int64_t>(seq.request.prompt.size());
  done.cached_tokens = seq.cached;
  done.completion_tokens = seq.generated;
  std::string tail = seq.decoder ? seq.decoder->finish() : std::string();
  if (seq.stops) tail = seq.stops->stopped() ? std::string() : seq.stops->push(tail) + seq.stops->flush();
  done.text = std::move(tail);
  deliver(seq, done);
  if (reason == StopReason::Callback)
    ++loop_stats.requests_cancelled;
  else
    ++loop_stats.requests_finished;
  // A request still in its prompt, or whose last token was EOS (never fed), is cached as it is;
  // otherwise the next step's row consumes the last token first.
  if (seq.phase == Phase::Decode && seq.unfed >= 0)
    seq.phase = Phase::Finishing;
  else
    release(seq);
}

void Scheduler::Impl::release(Sequence& seq) {
  if (seq.state.position > 0)
    cache.put(std::span(seq.history).first(static_cast<size_t>(seq.state.position)), seq.state);
  seq.retired = true;
}

void Scheduler::Impl::fail(Sequence& seq, const std::string& message, bool cancelled) {
  ServeEvent error;
  error.kind = ServeEvent::Kind::Error;
  error.error = message;
  deliver(seq, error);
  if (cancelled)
    ++loop_stats.requests_cancelled;
  else
    ++loop_stats.requests_failed;
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

bool Scheduler::Impl::deliver(Sequence& seq, const ServeEvent& event) {
  try {
    return seq.sink(event);
  } catch (...) {
    return false;
  }
}

void Scheduler::Impl::publish_metrics(double seconds, int64_t rows) {
  if (rows > 0 || seconds > 0) {
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
  if (seconds > 0) {
    if (recent_steps.size() < kRecentSteps)
      recent_steps.push_back(seconds);
    else
      recent_steps[recent_next] = seconds;
    recent_next = (recent_next + 1) % kRecentSteps;
  }
}

}  // namespace mb

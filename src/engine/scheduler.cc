// SPDX-License-Identifier: MIT
#include "engine/scheduler.h"

#include <algorithm>

#include "engine/scheduler_impl.h"
#include "engine/slot_file.h"
#include "engine/stale_temporaries.h"

namespace mb {
namespace {

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
  if (options.slot_persist && options.slot_save_path.empty())
    throw Error("slot_persist needs a slot save path (--slot-persist needs --slot-save-path)");
  // The prefix store reclaims the folder's stale temporaries itself (and counts them).
  if (!options.slot_save_path.empty() && !options.slot_persist)
    reclaim_stale_temporaries(options.slot_save_path);
  impl_ = std::make_unique<Impl>(model, tokenizer, ctx, std::move(options));
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
  return impl_->vocabulary.eos_ids;
}

RequestId Scheduler::submit(ServeRequest request, ServeSink sink) {
  Impl& s = *impl_;
  if (!sink) throw Error("submit needs a sink for the request's events");
  validate_request(request.prompt, scheduler_detail::decode_settings(request), s.vocabulary, s.tokenizer);
  if (request.n < 1 || request.n > kMaxChoices)
    throw Error("n must be in [1, " + std::to_string(kMaxChoices) + "] (choices per request), got " +
                std::to_string(request.n));
  if (request.n_probs < 0 || request.n_probs > kMaxProbs)
    throw Error("n_probs must be in [0, " + std::to_string(kMaxProbs) + "], got " +
                std::to_string(request.n_probs));
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
  std::lock_guard serial(s.stop_mutex);
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
  if (s.store) m.store = s.store->counters();
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
  // A saved prefix is a prompt prefix, so its ids follow the prompt-id rule.
  check_token_ids(prefix, s.vocabulary, "prefix");
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
  // The file may come from a model of the same shape with another tokenizer.
  check_token_ids(slot.tokens, s.vocabulary, "slot '" + name + "'");
  const size_t bytes = (slot.tokens.size() + slot.state.floats()) * sizeof(float);
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
  SequenceState state;
  const size_t cached = cache.lookup(prefix, state, prefix.size());
  if (state.empty()) state = model.new_state();
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

}  // namespace mb

// SPDX-License-Identifier: MIT
// Internal to the scheduler (scheduler.cc: the public methods and the background thread;
// scheduler_step.cc: one step of the loop). Not part of the API.
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <future>
#include <mutex>
#include <thread>

#include "engine/prefix_cache.h"
#include "engine/prefix_store.h"
#include "engine/request_decoder.h"
#include "engine/scheduler.h"

namespace mb::scheduler_detail {

using Clock = std::chrono::steady_clock;

// Step durations kept for the quantiles in metrics().
constexpr size_t kRecentSteps = 1024;

inline DecodeSettings decode_settings(const ServeRequest& request) {
  return {request.sampling, request.max_tokens, request.stop, request.stop_at_eos, request.constraint};
}

struct Pending {
  RequestId id;
  ServeRequest request;
  ServeSink sink;
};

enum class Phase {
  Prefill,    // consuming the prompt; the state has consumed decoder.history()[0, state.position)
  Decode,     // the last generated token (unfed) goes in with the next step's row
  Finishing,  // done and reported; one state-only row consumes the last token before caching
};

// A request in a slot. Only the scheduler thread touches it.
struct Sequence {
  RequestId id;
  ServeRequest request;
  ServeSink sink;
  SequenceState state;
  // Sampling, stop conditions and text; its history (prompt + generated tokens) is also what
  // the prefill chunks read and what the cache entries are keyed by.
  RequestDecoder decoder;
  Phase phase = Phase::Prefill;
  int64_t cached = 0;  // prompt tokens resumed from the prefix cache
  int32_t unfed = -1;  // the last generated token, not yet consumed by the state
  int choice = 0;      // which of the request's n choices; choices 1.. are forks made at the prompt's end
  bool cancel_requested = false;
  bool retired = false;  // leaves the slot at the end of this step
};

}  // namespace mb::scheduler_detail

namespace mb {

struct Scheduler::Impl {
  using Pending = scheduler_detail::Pending;
  using Sequence = scheduler_detail::Sequence;

  Impl(const Model& m, const Tokenizer* t, ComputeContext c, SchedulerOptions o)
      : model(m),
        tokenizer(t),
        ctx(c),
        options(std::move(o)),
        vocabulary(generation_vocabulary(m.config(), t)),
        cache(options.cache_bytes) {
    if (options.slot_persist)
      store = std::make_unique<PrefixStore>(
          m,
          PrefixStoreOptions{.folder = options.slot_save_path, .budget_bytes = options.slot_persist_bytes});
  }

  // Scheduler thread.
  bool step();
  void admit(Pending pending);
  void build_batch();
  void after_forward(Sequence& seq, std::span<const float> logits);
  void sample_next(Sequence& seq, std::span<const float> logits);
  // The prompt is consumed and `logits` is its last row: forks the request's other choices off
  // `seq` (scheduler_choices.cc), then samples every choice's first token.
  void start_decoding(Sequence& seq, std::span<const float> logits);
  // Slots a sequence holds towards max_active: a request's n before its fork, else one.
  static int slots_held(const Sequence& seq);
  // Reports the end of a request whose decoder is done, with the decoder's stop reason.
  void finish(Sequence& seq);
  // Caches the state (with `logits`, its last position's output row, when at hand) and retires.
  void release(Sequence& seq, std::span<const float> logits = {});
  void fail(Sequence& seq, const std::string& message, bool cancelled);
  void fail_everything(const std::string& message);
  bool deliver(Sequence& seq, ServeEvent& event);  // stamps the event with seq's choice
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
  GenerationVocabulary vocabulary;  // the same EOS ids and valid vocabulary as Generator

  // Owned by the scheduler thread.
  Workspace workspace;
  PrefixStateCache cache;
  std::unique_ptr<PrefixStore> store;             // null without slot_persist; writes on its own thread
  std::vector<std::unique_ptr<Sequence>> active;  // in admission order
  std::vector<SequenceInput> batch;
  std::vector<Sequence*> batch_owner;
  std::vector<std::vector<float>> outputs;
  SchedulerMetrics loop_stats;  // the counters only the scheduler thread changes
  std::mutex loop_mutex;        // held by whoever runs a step or slot work
  std::mutex stop_mutex;        // serializes stop() calls, so one of them joins the thread

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

}  // namespace mb

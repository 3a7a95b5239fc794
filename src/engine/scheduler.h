// SPDX-License-Identifier: MIT
// The serving scheduler: continuous batching of generation requests over one Model.
//
// Requests join and leave between steps. Each step is one Model::forward over every active
// sequence: the decode rows of running sequences first, then prefill chunks of new prompts up to
// a token budget, so a long prompt never stalls the others. Every request has its own sampler
// and seed, and the model is exact (a sequence in a batch equals it alone, prefill equals decode
// steps, the chunk size changes nothing), so a request served here gets bit for bit the tokens
// and log-probabilities it would get from Generator::generate alone on a fresh state, whatever
// else is in flight and whatever part of its prompt came from the prefix cache.
//
// Prefix cache: every `cache_every` prompt tokens during prefill, at the end of the prompt (the
// prefix a chat's next turn re-renders) and when a request ends, the sequence's state goes into a
// PrefixStateCache under the tokens it has consumed. A request that ends by max_tokens, a stop string or a
// cancellation first consumes its last generated token (one state-only row in the next step, after the Done
// event went out), so that entry covers the prompt plus every generated token: the prefix of the next turn of
// a conversation. A new request resumes from the longest cached prefix of its prompt and prefills only the
// rest. Entries made after a forward pass keep their last position's logits row, so a prompt equal to a
// cached prefix (a retry, a regenerate) prefills nothing: its first token is sampled from that row, and it
// reports its whole prompt as cached.
//
// Shared prefix store (slot_persist): the end-of-prompt and end-of-request states also go to files
// in slot_save_path, written by a background thread; a request whose prompt misses the in-memory
// cache (or finds only a shorter prefix there) resumes from the longest prefix stored in the
// folder by any server, which then enters the in-memory cache too. The lookup reads a file on the
// scheduler thread (a state is a few MB), which costs far less than the prefill it saves.
//
// Threads: submit, cancel, metrics, save_prefix and restore_prefix may be called from any
// thread. Only the scheduler thread (the one in start(), or the caller of step()) touches the
// model, the workspace and the cache; sinks are called on it, without any lock held, so a sink
// may call cancel() or metrics() (not save_prefix or restore_prefix, which wait for that thread).
// A sink should not block: every request waits while one does, so a server hands the event to
// the connection's own queue and returns.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/threading.h"
#include "engine/embed.h"
#include "engine/generate.h"
#include "engine/prefix_store.h"
#include "engine/sampler.h"
#include "engine/token_logprobs.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"

namespace mb {

using RequestId = uint64_t;

// The most candidates a request may ask for with each token.
inline constexpr int kMaxProbs = 20;
// The most choices (ServeRequest::n) one request may ask for.
inline constexpr int kMaxChoices = 16;

struct ServeRequest {
  std::vector<int32_t> prompt;    // at least one token, every id valid (engine/request_decoder.h)
  int max_tokens = 16;            // >= 0
  SamplingParams sampling;        // engine/sampler.h; seed is per request
  std::vector<std::string> stop;  // stop strings (need a tokenizer)
  bool stop_at_eos = true;
  // Whether Token events carry the chosen token's log-probability. The raw-logit form is a pass
  // over the vocabulary per token, so the server asks for it only when its client does.
  bool logprobs = true;
  int n_probs = 0;  // top candidates reported with each token, 0..kMaxProbs (implies logprobs)
  // true: log-probabilities come from the final sampling distribution (after penalties, top-k,
  // temperature, top-p and min-p; a greedy request's chosen token has probability 1). false: from
  // the softmax of the model's raw logits over the valid vocabulary, as OpenAI's logprobs.
  bool post_sampling_probs = true;
  // Choices (OpenAI's n), 1..kMaxChoices. The prompt is prefilled once; at its end the state is
  // forked into n sequences, and choice i samples with seed + i (wrapping), so it equals, bit for
  // bit, the request with n = 1 and seed + i alone, and with a fixed seed the choices differ. The
  // request takes n of the max_active slots once admitted (all of them when n is larger).
  int n = 1;
  // Which tokens may come next (engine/token_constraint.h: a grammar, ...); null: any. Each
  // request decodes with its own clone, so the server may hand one compiled constraint to many.
  std::shared_ptr<TokenConstraint> constraint = nullptr;
};

// Delivered to a request's sink on the scheduler thread, in order: Token events, then exactly
// one Done or Error event (none after the sink returned false: the receiver is gone). With n > 1
// every choice sends its own Token events and its own Done or Error, `choice` saying whose; the
// choices' events interleave, each choice's in order.
struct ServeEvent {
  enum class Kind { Token, Done, Error } kind = Kind::Token;
  int choice = 0;      // which of the request's n choices, 0..n-1
  int32_t token = -1;  // Token: the generated id
  std::string text;    // Token: text that became final with it (may be empty);
                       // Done: the held-back tail released at the end (may be empty)
  float logprob = 0;   // Token: log-probability of token (see ServeRequest::post_sampling_probs)
  std::vector<TokenProbability> top;  // Token: the n_probs most likely candidates, most likely first
  // Done (engine/request_decoder.h). StopReason::Callback means cancelled through cancel().
  StopReason stop_reason = StopReason::MaxTokens;
  std::string stop_string;  // Done with StopReason::StopString: the stop string that matched
  int64_t prompt_tokens = 0, cached_tokens = 0, completion_tokens = 0;  // Done: usage
  std::string error;                                                    // Error: message
};
// Returns false when the receiver is gone (client disconnected): the request is cancelled and its
// slot freed at the next step. A sink that throws counts as one that returned false.
using ServeSink = std::function<bool(const ServeEvent&)>;

struct SchedulerOptions {
  int max_active = 4;               // -np/--parallel: sequences in flight together
  int64_t step_token_budget = 512;  // positions per step: decode rows first, then prefill chunks
  size_t max_waiting = 64;          // queued requests past which submit throws QueueFull
  int64_t max_context = 0;          // -c: prompt + max_tokens limit per request; 0 = none
  // --cache-every: cache the state every N prompt tokens; 0 = never. Prefill chunks end at these
  // multiples, so an N below step_token_budget also splits a long prompt into more steps.
  int64_t cache_every = 512;
  size_t cache_bytes = 256u << 20;  // --cache-mb; 0 disables the prefix cache
  std::string slot_save_path;       // --slot-save-path ("" = slot saving disabled)
  // --slot-persist: also write the state each request's prompt and each finished request end with
  // into slot_save_path (engine/prefix_store.h), and resume a cache miss from the longest prefix
  // stored there by any server sharing the folder. Needs slot_save_path.
  bool slot_persist = false;
  uint64_t slot_persist_bytes = uint64_t{1} << 30;  // --slot-persist-mb: the store's byte budget
};

struct SchedulerMetrics {
  // Accepted by submit; ended by Done (finished); by cancel(), a sink returning false or
  // stop(false) (cancelled); by an Error event for any other reason (failed). A request of n
  // choices counts once, by how its first choice ended; generated_tokens counts every choice's.
  uint64_t requests_submitted = 0, requests_finished = 0, requests_cancelled = 0, requests_failed = 0;
  // prompt_tokens counts every admitted prompt's tokens, cached_prompt_tokens the part of them
  // resumed from the cache (so prompt_tokens - cached_prompt_tokens were prefilled).
  // steps: forward calls (a step that only handled cancellations or slot work is not counted).
  uint64_t prompt_tokens = 0, cached_prompt_tokens = 0, generated_tokens = 0, steps = 0;
  // The part of cached_prompt_tokens resumed from the shared prefix store (--slot-persist), and
  // the store's own counters (all zero without it).
  uint64_t stored_prompt_tokens = 0;
  PrefixStoreCounters store;
  size_t waiting = 0, active = 0, cache_entries = 0, cache_bytes = 0;
  uint64_t cache_hits = 0, cache_misses = 0;
  std::vector<double> step_seconds_quantiles;  // p50, p90, p99 of recent steps (empty before the first)
  double step_seconds_sum = 0;                 // time spent in steps: busy time
  uint64_t step_rows = 0;                      // positions run by all steps (prefill + decode)
};

class QueueFull : public Error {  // -> HTTP 503 with Retry-After
 public:
  using Error::Error;
};

class Scheduler {
 public:
  // `tokenizer` may be null (token ids only; stop strings then refused). Throws mb::Error for
  // out-of-range options. The model and tokenizer must outlive the scheduler.
  Scheduler(const Model& model, const Tokenizer* tokenizer, ComputeContext ctx, SchedulerOptions options);
  ~Scheduler();  // stop(false) if still running
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  // Thread-safe. Validates the request (mb::Error naming the problem, e.g. "max_tokens must be >= 0")
  // and queues it; throws QueueFull when max_waiting requests already wait, and mb::Error once
  // stop() was called.
  RequestId submit(ServeRequest request, ServeSink sink);
  // Thread-safe; frees the slot at the next step, which sends a Done event with
  // StopReason::Callback (one per unfinished choice). Unknown or finished ids are ignored.
  void cancel(RequestId id);

  // One step on the caller's thread (tests; not while start() runs); false when idle.
  bool step();
  // Runs steps on a background thread until stop().
  void start();
  // drain: finish queued and in-flight requests first; else each gets an Error event. Later
  // submits are refused. Without start(), runs the remaining steps on the caller's thread.
  void stop(bool drain);
  SchedulerMetrics metrics() const;  // thread-safe snapshot

  // Slots: save the state of a token prefix to <slot_save_path>/<name> and restore it into the
  // prefix cache (names are plain file names: letters, digits, '.', '_', '-', not starting with
  // '.'). A prefix that is not cached is computed first (from its longest cached prefix). Both
  // run on the scheduler thread between steps and wait for it; they throw mb::Error for a bad
  // name, a disabled slot path, and a missing, corrupt or foreign file.
  void save_prefix(const std::string& name, std::span<const int32_t> prefix);
  size_t restore_prefix(const std::string& name);  // returns the restored prefix length

  // Embeddings of `inputs` (engine/embed.h), run on the scheduler thread between steps as slot
  // work is: one group of sequences (one forward call, rounds of at most step_token_budget
  // positions) per turn, so generation keeps stepping between groups. Thread-safe, but not from a
  // sink (it waits for the scheduler thread); throws mb::Error as embed_batch does, before any
  // group runs.
  std::vector<std::vector<float>> embed(std::span<const std::vector<int32_t>> inputs, EmbedOptions options);

  // The ids that end generation when a request has stop_at_eos (config plus tokenizer).
  const std::vector<int32_t>& eos_ids() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace mb

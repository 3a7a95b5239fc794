// SPDX-License-Identifier: MIT
// The serving scheduler: a request gets bit for bit the tokens and log-probabilities of
// Generator::generate on a fresh state whether it runs alone, resumes from the prefix cache,
// shares steps with requests arriving later, or has its prompt split over many steps; plus
// cancellation, the queue limit, request validation, stopping, metrics and slot files.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <future>
#include <nlohmann/json.hpp>

#include "common/hybrid_configs.h"
#include "common/mamba2_reference.h"
#include "common/model_fixture.h"
#include "common/test_util.h"
#include "common/zamba2_config.h"
#include "core/error.h"
#include "engine/generate.h"
#include "engine/scheduler.h"
#include "engine/state_file.h"
#include "io/mapped_file.h"
#include "model/families/falcon_h1.h"
#include "model/families/jamba.h"
#include "model/family.h"

namespace mb {
namespace {

using test::same_bits;

struct TextModel {
  std::unique_ptr<Model> model;
  std::unique_ptr<Tokenizer> tokenizer;
};

// The "tiny" preset (Mamba-1) or a Mamba-2 model of the same width, each with its byte-level
// tokenizer (id 0, <|endoftext|>, is an EOS id).
const TextModel& text_model(Architecture arch = Architecture::Mamba1) {
  static std::map<Architecture, TextModel> models;
  auto it = models.find(arch);
  if (it == models.end()) {
    MakeModelOptions o;
    o.config = arch == Architecture::Mamba2 ? test::mamba2_config(64, 16, 16, 1, 512) : preset_config("tiny");
    o.seed = 17;
    const std::string dir = test::make_temp_dir("scheduler_model");
    make_model(dir, o);
    TextModel m{Model::load(dir), std::make_unique<Tokenizer>(Tokenizer::from_model_dir(dir))};
    it = models.emplace(arch, std::move(m)).first;
  }
  return it->second;
}

// A hybrid of the same width with its byte-level tokenizer: Granite-4.0-H, Nemotron-H, Jamba,
// Falcon-H1 or Zamba2 (Bamba: its own test).
const TextModel& hybrid_text_model(ModelFamily family) {
  static std::map<ModelFamily, TextModel> models;
  auto it = models.find(family);
  if (it == models.end()) {
    MakeModelOptions o;
    o.config = family == ModelFamily::GraniteHybrid ? test::granite_config("M*M", 64, 512)
               : family == ModelFamily::Jamba
                   // Mamba-1 mixers with attention at layer 1 and experts on layers 1 and 3.
                   ? parse_model_config(jamba_family().example(64, 4, 512), "jamba example")
                   : family == ModelFamily::FalconH1
                         ? parse_model_config(falcon_h1_family().example(64, 2, 512), "falcon-h1 example")
                         : test::nemotron_config("M*-M", 64, 512);
    if (family == ModelFamily::Bamba) o.config = test::bamba_config("M*M", 64, 512);
    if (family == ModelFamily::Zamba2) o.config = test::zamba2_config({}, 64, 5, 512);
    o.seed = 18;
    const std::string dir = test::make_temp_dir("scheduler_hybrid");
    make_model(dir, o);
    TextModel m{Model::load(dir), std::make_unique<Tokenizer>(Tokenizer::from_model_dir(dir))};
    it = models.emplace(family, std::move(m)).first;
  }
  return it->second;
}

const ComputeContext kCtx{1, best_isa()};

// What a request's sink received.
struct Collected {
  std::vector<int32_t> tokens;
  std::vector<float> logprobs;
  std::vector<std::vector<TokenProbability>> top;
  std::string text;
  std::optional<ServeEvent> done, error;
  int events_after_end = 0;

  ServeSink sink() {
    return [this](const ServeEvent& e) {
      if (done || error) ++events_after_end;
      if (e.kind == ServeEvent::Kind::Token) {
        tokens.push_back(e.token);
        logprobs.push_back(e.logprob);
        top.push_back(e.top);
      } else if (e.kind == ServeEvent::Kind::Done) {
        done = e;
      } else {
        error = e;
      }
      text += e.text;
      return true;
    };
  }
};

struct Expected {
  std::vector<int32_t> tokens;
  std::vector<float> logprobs;
  std::vector<std::vector<TokenProbability>> top;
  StopReason reason = StopReason::MaxTokens;
};

// The request run alone on a fresh state, one forward call per token, with the same sampler
// and the same log-probability function; its tokens are checked against Generator::generate.
Expected reference_run(const TextModel& m, const ServeRequest& r) {
  Generator generator(*m.model, m.tokenizer.get(), kCtx);
  GenerateRequest g{r.prompt, r.max_tokens, r.sampling, r.stop, r.stop_at_eos};
  SequenceState generated_state = m.model->new_state();
  const GenerateResult generated = generator.generate(g, generated_state);

  Expected e;
  const std::vector<int32_t> eos = generator.eos_ids();
  Sampler sampler(r.sampling, std::min<int32_t>(static_cast<int32_t>(m.model->config().vocab_size),
                                                m.tokenizer->vocab_size()));
  SequenceState state = m.model->new_state();
  std::vector<float> logits = test::prefill(*m.model, kCtx, r.prompt, state, {OutputKind::LogitsLast, 0});
  std::vector<int32_t> history = r.prompt;
  while (static_cast<int>(e.tokens.size()) < r.max_tokens) {
    const int32_t token = sampler.sample(logits, history);
    if (r.stop_at_eos && std::find(eos.begin(), eos.end(), token) != eos.end()) {
      e.reason = StopReason::Eos;
      break;
    }
    const TokenLogprobs probs = token_logprobs(sampler, logits, token, r.n_probs, r.post_sampling_probs);
    e.tokens.push_back(token);
    e.logprobs.push_back(probs.logprob);
    e.top.push_back(probs.top);
    history.push_back(token);
    logits = test::prefill(*m.model, kCtx, {token}, state, {OutputKind::LogitsLast, 0});
  }
  EXPECT_EQ(e.tokens, generated.tokens) << "the reference loop disagrees with Generator::generate";
  EXPECT_EQ(e.reason, generated.stop_reason);
  return e;
}

void expect_same(const Collected& got, const Expected& want, const std::string& what) {
  ASSERT_TRUE(got.done.has_value()) << what << ": no Done event";
  EXPECT_FALSE(got.error.has_value()) << what;
  EXPECT_EQ(got.events_after_end, 0) << what;
  EXPECT_EQ(got.tokens, want.tokens) << what;
  EXPECT_TRUE(same_bits(got.logprobs, want.logprobs)) << what << ": log-probabilities differ";
  ASSERT_EQ(got.top.size(), want.top.size()) << what;
  for (size_t i = 0; i < got.top.size(); ++i) {
    ASSERT_EQ(got.top[i].size(), want.top[i].size()) << what << " token " << i;
    for (size_t j = 0; j < got.top[i].size(); ++j) {
      EXPECT_EQ(got.top[i][j].token, want.top[i][j].token) << what;
      EXPECT_EQ(std::memcmp(&got.top[i][j].logprob, &want.top[i][j].logprob, sizeof(float)), 0) << what;
    }
  }
  EXPECT_EQ(got.done->stop_reason, want.reason) << what;
  EXPECT_EQ(got.done->completion_tokens, static_cast<int64_t>(want.tokens.size())) << what;
}

void run_until_idle(Scheduler& scheduler) {
  for (int i = 0; i < 10000 && scheduler.step(); ++i) {
  }
}

// Greedy with raw-model log-probabilities, or seeded sampling with post-sampling ones.
struct Mode {
  const char* name;
  float temperature;
  bool post_sampling;
};

ServeRequest make_request(std::vector<int32_t> prompt, int max_tokens, const Mode& mode, uint64_t seed) {
  ServeRequest r;
  r.prompt = std::move(prompt);
  r.max_tokens = max_tokens;
  r.sampling.temperature = mode.temperature;
  r.sampling.top_k = 40;
  r.sampling.repeat_penalty = 1.5f;  // strong enough that the history matters
  r.sampling.seed = seed;
  r.n_probs = 4;
  r.post_sampling_probs = mode.post_sampling;
  return r;
}

std::vector<int32_t> tokens(size_t count, uint64_t seed) {
  // Ids 1..256 are byte tokens: no EOS in a prompt.
  std::vector<int32_t> t = test::random_tokens(count, 256, seed);
  for (int32_t& id : t) id += 1;
  return t;
}

ServeRequest no_eos(ServeRequest r) {
  r.stop_at_eos = false;
  return r;
}

std::vector<int32_t> concat(std::vector<int32_t> a, const std::vector<int32_t>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

class SchedulerExactness : public ::testing::TestWithParam<Mode> {};

TEST_P(SchedulerExactness, AloneColdEqualsGenerate) {
  const TextModel& m = text_model();
  const ServeRequest r = make_request(tokens(19, 1), 10, GetParam(), 7);
  Scheduler scheduler(*m.model, m.tokenizer.get(), kCtx, {});
  Collected got;
  scheduler.submit(r, got.sink());
  run_until_idle(scheduler);
  expect_same(got, reference_run(m, r), "alone");
  EXPECT_EQ(got.done->cached_tokens, 0);
  EXPECT_EQ(got.done->prompt_tokens, 19);
}

TEST_P(SchedulerExactness, ResumedFromTheCacheEqualsGenerate) {
  const TextModel& m = text_model();
  SchedulerOptions options;
  options.cache_every = 8;
  Scheduler scheduler(*m.model, m.tokenizer.get(), kCtx, options);
  const std::vector<int32_t> shared = tokens(20, 2);
  const ServeRequest first = make_request(concat(shared, tokens(5, 3)), 6, GetParam(), 1);
  Collected first_got;
  scheduler.submit(first, first_got.sink());
  run_until_idle(scheduler);
  expect_same(first_got, reference_run(m, first), "first");

  // Shares 20 prompt tokens: resumes from the entry cached at 16 (a multiple of cache_every).
  const ServeRequest sibling = make_request(concat(shared, tokens(7, 4)), 8, GetParam(), 2);
  Collected sibling_got;
  scheduler.submit(sibling, sibling_got.sink());
  run_until_idle(scheduler);
  expect_same(sibling_got, reference_run(m, sibling), "sibling");
  EXPECT_EQ(sibling_got.done->cached_tokens, 16);

  // The next turn of the first conversation: resumes from the state after its last token.
  const std::vector<int32_t> history = concat(first.prompt, first_got.tokens);
  const ServeRequest next_turn = make_request(concat(history, tokens(4, 5)), 8, GetParam(), 3);
  Collected next_got;
  scheduler.submit(next_turn, next_got.sink());
  run_until_idle(scheduler);
  expect_same(next_got, reference_run(m, next_turn), "next turn");
  // After Eos the last token was never fed, so the state covers exactly the history too.
  EXPECT_EQ(next_got.done->cached_tokens, static_cast<int64_t>(history.size()));
  EXPECT_GE(scheduler.metrics().cache_hits, 2u);
}

// A chat's next turn re-renders the previous prompt and a reply that usually tokenizes
// differently from the generated ids: it resumes from the state cached at the end of the prompt.
TEST_P(SchedulerExactness, AFollowUpResumesFromTheEndOfThePreviousPrompt) {
  const TextModel& m = text_model();
  Scheduler scheduler(*m.model, m.tokenizer.get(), kCtx, {});  // cache_every 512: no mid-prompt entry
  const ServeRequest first = make_request(tokens(23, 6), 5, GetParam(), 4);
  Collected first_got;
  scheduler.submit(first, first_got.sink());
  run_until_idle(scheduler);
  const ServeRequest follow_up = make_request(concat(first.prompt, tokens(9, 7)), 6, GetParam(), 5);
  Collected follow_up_got;
  scheduler.submit(follow_up, follow_up_got.sink());
  run_until_idle(scheduler);
  expect_same(follow_up_got, reference_run(m, follow_up), "follow-up");
  EXPECT_EQ(follow_up_got.done->cached_tokens, 23);
}

TEST_P(SchedulerExactness, ConcurrentRequestsArrivingAtDifferentStepsEqualGenerate) {
  const TextModel& m = text_model();
  SchedulerOptions options;
  options.step_token_budget = 16;
  Scheduler scheduler(*m.model, m.tokenizer.get(), kCtx, options);
  std::vector<ServeRequest> requests;
  for (int i = 0; i < 4; ++i)
    requests.push_back(
        make_request(tokens(7 + 9 * static_cast<size_t>(i), 10 + i), 9 - i, GetParam(), 20 + i));
  requests[2].sampling.temperature = 1.2f;  // each request keeps its own parameters
  std::vector<Collected> got(requests.size());
  for (size_t i = 0; i < requests.size(); ++i) {
    scheduler.submit(requests[i], got[i].sink());
    scheduler.step();
  }
  run_until_idle(scheduler);
  for (size_t i = 0; i < requests.size(); ++i)
    expect_same(got[i], reference_run(m, requests[i]), "request " + std::to_string(i));
}

TEST_P(SchedulerExactness, APromptSplitOverManyStepsEqualsGenerate) {
  const TextModel& m = text_model();
  SchedulerOptions options;
  options.step_token_budget = 3;  // decode rows of the other request take part of it
  options.cache_every = 5;
  Scheduler scheduler(*m.model, m.tokenizer.get(), kCtx, options);
  ServeRequest other = make_request(tokens(2, 30), 20, GetParam(), 4);
  other.stop_at_eos = false;  // keeps decoding while the other prompt is prefilled
  const ServeRequest split = make_request(tokens(23, 31), 7, GetParam(), 5);
  Collected other_got, split_got;
  scheduler.submit(other, other_got.sink());
  scheduler.step();
  scheduler.submit(split, split_got.sink());
  int steps = 0;
  while (scheduler.step()) ++steps;
  EXPECT_GE(steps, 12);  // 23 prompt positions at most 2 per step
  expect_same(split_got, reference_run(m, split), "split");
  expect_same(other_got, reference_run(m, other), "other");
}

// The same prompt sent again (a retry, a regenerate) resumes from the entry cached at the end of
// the first one's prompt, whose logits row chooses its first token: nothing is prefilled, the whole
// prompt is reported cached, and the answer is the first one's bit for bit. So is a prompt equal
// to a whole earlier conversation (prompt and reply), cached when that request ended.
void expect_repeated_prompts_served_from_the_cache(const TextModel& m, const Mode& mode) {
  Scheduler scheduler(*m.model, m.tokenizer.get(), kCtx, {});  // cache_every 512: no mid-prompt entry
  const ServeRequest r = no_eos(make_request(tokens(17, 60), 6, mode, 8));
  const Expected want = reference_run(m, r);
  for (int i = 0; i < 3; ++i) {
    SCOPED_TRACE("request " + std::to_string(i));
    const uint64_t rows_before = scheduler.metrics().step_rows;
    Collected got;
    scheduler.submit(r, got.sink());
    run_until_idle(scheduler);
    expect_same(got, want, "repeated");
    EXPECT_EQ(got.done->prompt_tokens, 17);
    EXPECT_EQ(got.done->cached_tokens, i == 0 ? 0 : 17);
    // One decode row per generated token (the last one consumed before caching); the first
    // request's prompt adds 17.
    EXPECT_EQ(scheduler.metrics().step_rows - rows_before, i == 0 ? 17u + 6u : 6u);
  }
  const ServeRequest whole = no_eos(make_request(concat(r.prompt, want.tokens), 4, mode, 9));
  Collected got;
  scheduler.submit(whole, got.sink());
  run_until_idle(scheduler);
  expect_same(got, reference_run(m, whole), "the whole conversation");
  EXPECT_EQ(got.done->cached_tokens, static_cast<int64_t>(whole.prompt.size()));
}

TEST_P(SchedulerExactness, ARepeatedPromptIsServedFromTheCache) {
  expect_repeated_prompts_served_from_the_cache(text_model(), GetParam());
}

INSTANTIATE_TEST_SUITE_P(Modes, SchedulerExactness,
                         ::testing::Values(Mode{"Greedy", 0.0f, false}, Mode{"Seeded", 0.9f, true}),
                         [](const auto& info) { return std::string(info.param.name); });

// Two requests at once, then a third that shares the first's prefix, then a follow-up of the second:
// each equals generate bit for bit, the third resumes from the entry cached at 8 (cache_every 4)
// and the follow-up from the entry at the end of the second's prompt.
void expect_concurrent_and_cached_requests_equal_generate(const TextModel& m) {
  SchedulerOptions options;
  options.step_token_budget = 6;
  options.cache_every = 4;
  Scheduler scheduler(*m.model, m.tokenizer.get(), kCtx, options);
  const Mode seeded{"Seeded", 0.9f, true};
  const std::vector<int32_t> shared = tokens(9, 40);
  const std::vector<ServeRequest> requests = {
      make_request(concat(shared, tokens(3, 41)), 6, seeded, 1), make_request(tokens(11, 42), 5, seeded, 2),
      make_request(concat(shared, tokens(5, 43)), 6, seeded, 3),
      make_request(concat(tokens(11, 42), tokens(6, 44)), 5, seeded, 4)};
  std::vector<Collected> got(requests.size());
  scheduler.submit(requests[0], got[0].sink());
  scheduler.submit(requests[1], got[1].sink());
  run_until_idle(scheduler);
  for (size_t i = 2; i < requests.size(); ++i) {
    scheduler.submit(requests[i], got[i].sink());
    run_until_idle(scheduler);
  }
  for (size_t i = 0; i < requests.size(); ++i)
    expect_same(got[i], reference_run(m, requests[i]), "request " + std::to_string(i));
  EXPECT_EQ(got[2].done->cached_tokens, 8);
  EXPECT_EQ(got[3].done->cached_tokens, 11);
}

TEST(Scheduler, Mamba2ConcurrentAndCachedRequestsEqualGenerate) {
  expect_concurrent_and_cached_requests_equal_generate(text_model(Architecture::Mamba2));
}

// The hybrids' states hold KV parts that grow with the position; resumed requests still equal the
// cold ones bit for bit.
TEST(Scheduler, HybridConcurrentAndCachedRequestsEqualGenerate) {
  for (ModelFamily family : {ModelFamily::GraniteHybrid, ModelFamily::NemotronH, ModelFamily::Jamba,
                             ModelFamily::FalconH1, ModelFamily::Zamba2}) {
    SCOPED_TRACE(static_cast<int>(family));
    expect_concurrent_and_cached_requests_equal_generate(hybrid_text_model(family));
  }
}

// Bamba's keys are rotated over half of each head before they enter the cache: a request resumed
// from the prefix cache still equals a cold one bit for bit.
TEST(Scheduler, BambaConcurrentAndCachedRequestsEqualGenerate) {
  expect_concurrent_and_cached_requests_equal_generate(hybrid_text_model(ModelFamily::Bamba));
}

TEST(Scheduler, RepeatedPromptsOfMamba2AndHybridsAreServedFromTheCache) {
  const Mode seeded{"Seeded", 0.9f, true};
  expect_repeated_prompts_served_from_the_cache(text_model(Architecture::Mamba2), seeded);
  for (ModelFamily family : {ModelFamily::GraniteHybrid, ModelFamily::NemotronH, ModelFamily::Jamba,
                             ModelFamily::FalconH1, ModelFamily::Zamba2}) {
    SCOPED_TRACE(static_cast<int>(family));
    expect_repeated_prompts_served_from_the_cache(hybrid_text_model(family), seeded);
  }
}

TEST(Scheduler, StopStringsAndStreamedTextMatchGenerate) {
  const TextModel& m = text_model();
  ServeRequest probe = make_request(m.tokenizer->encode("Hello there"), 24, {"Greedy", 0.0f, false}, 0);
  probe.stop_at_eos = false;
  Generator generator(*m.model, m.tokenizer.get(), kCtx);
  SequenceState probe_state = m.model->new_state();
  const GenerateResult free_run =
      generator.generate({probe.prompt, probe.max_tokens, probe.sampling, {}, false}, probe_state);
  ASSERT_GE(free_run.text.size(), 6u);
  ServeRequest r = probe;
  // Two stop strings, one that never matches: the Done event names the one that did.
  const std::string matching = free_run.text.substr(free_run.text.size() / 2, 3);
  r.stop = {"\x7f\x7f\x7f", matching};
  SequenceState state = m.model->new_state();
  const GenerateResult want = generator.generate({r.prompt, r.max_tokens, r.sampling, r.stop, false}, state);
  ASSERT_EQ(want.stop_reason, StopReason::StopString);

  Scheduler scheduler(*m.model, m.tokenizer.get(), kCtx, {});
  Collected got, plain;
  scheduler.submit(r, got.sink());
  scheduler.submit(probe, plain.sink());
  run_until_idle(scheduler);
  ASSERT_TRUE(got.done.has_value());
  EXPECT_EQ(got.done->stop_reason, StopReason::StopString);
  EXPECT_EQ(got.done->stop_string, matching);
  EXPECT_EQ(got.tokens, want.tokens);
  EXPECT_EQ(got.text, want.text);
  ASSERT_TRUE(plain.done.has_value());
  EXPECT_EQ(plain.text, free_run.text);
}

TEST(Scheduler, ZeroMaxTokensReportsOnlyUsage) {
  const TextModel& m = text_model();
  Scheduler scheduler(*m.model, m.tokenizer.get(), kCtx, {});
  Collected got;
  ServeRequest r = make_request(tokens(5, 50), 0, {"Greedy", 0.0f, false}, 0);
  scheduler.submit(r, got.sink());
  run_until_idle(scheduler);
  ASSERT_TRUE(got.done.has_value());
  EXPECT_TRUE(got.tokens.empty());
  EXPECT_EQ(got.done->stop_reason, StopReason::MaxTokens);
  EXPECT_EQ(got.done->prompt_tokens, 5);
}

TEST(Scheduler, CancellationFreesTheSlotForTheNextStep) {
  const TextModel& m = text_model();
  SchedulerOptions options;
  options.max_active = 1;
  Scheduler scheduler(*m.model, m.tokenizer.get(), kCtx, options);
  const Mode greedy{"Greedy", 0.0f, false};
  ServeRequest long_request = make_request(tokens(4, 60), 200, greedy, 0);
  long_request.stop_at_eos = false;
  Collected a, b, c;
  const RequestId a_id = scheduler.submit(long_request, a.sink());
  scheduler.submit(no_eos(make_request(tokens(4, 61), 3, greedy, 0)), b.sink());
  scheduler.step();
  scheduler.step();
  EXPECT_EQ(a.tokens.size(), 2u);
  EXPECT_TRUE(b.tokens.empty());  // waits for the one slot
  EXPECT_EQ(scheduler.metrics().waiting, 1u);

  scheduler.cancel(a_id);
  scheduler.step();
  ASSERT_TRUE(a.done.has_value());
  EXPECT_EQ(a.done->stop_reason, StopReason::Callback);
  EXPECT_EQ(a.tokens.size(), 2u);
  EXPECT_EQ(b.tokens.size(), 1u);  // admitted and prefilled in the same step
  run_until_idle(scheduler);
  ASSERT_TRUE(b.done.has_value());

  // A sink that returns false is cancelled too: the waiting request gets the slot next step.
  bool receiver_gone = false;
  int events_after_false = 0;
  ServeRequest d = long_request;
  scheduler.submit(d, [&](const ServeEvent&) {
    if (receiver_gone) ++events_after_false;
    receiver_gone = true;
    return false;
  });
  scheduler.submit(no_eos(make_request(tokens(4, 62), 2, greedy, 0)), c.sink());
  scheduler.step();
  EXPECT_TRUE(c.tokens.empty());
  scheduler.step();
  EXPECT_EQ(c.tokens.size(), 1u);
  run_until_idle(scheduler);
  EXPECT_EQ(events_after_false, 0);
  ASSERT_TRUE(c.done.has_value());
  const SchedulerMetrics metrics = scheduler.metrics();
  EXPECT_EQ(metrics.requests_cancelled, 2u);
  EXPECT_EQ(metrics.requests_finished, 2u);
  EXPECT_EQ(metrics.active, 0u);

  // Cancelling a request that still waits removes it with a Done event.
  Collected queued, running;
  scheduler.submit(long_request, running.sink());
  const RequestId queued_id = scheduler.submit(long_request, queued.sink());
  scheduler.step();
  scheduler.cancel(queued_id);
  scheduler.step();
  ASSERT_TRUE(queued.done.has_value());
  EXPECT_TRUE(queued.tokens.empty());
  EXPECT_EQ(scheduler.metrics().waiting, 0u);
  scheduler.stop(false);  // before the sinks' owners go away
}

TEST(Scheduler, TheQueueLimitThrowsQueueFull) {
  const TextModel& m = text_model();
  SchedulerOptions options;
  options.max_waiting = 2;
  Scheduler scheduler(*m.model, m.tokenizer.get(), kCtx, options);
  Collected a, b, c;
  const ServeRequest r = make_request(tokens(3, 70), 2, {"Greedy", 0.0f, false}, 0);
  scheduler.submit(r, a.sink());
  scheduler.submit(r, b.sink());
  EXPECT_THROW(scheduler.submit(r, c.sink()), QueueFull);
  scheduler.step();  // both admitted: the queue has room again
  EXPECT_NO_THROW(scheduler.submit(r, c.sink()));
  run_until_idle(scheduler);
  EXPECT_TRUE(a.done && b.done && c.done);
}

TEST(Scheduler, InvalidRequestsAreRefusedWithClearMessages) {
  const TextModel& m = text_model();
  SchedulerOptions options;
  options.max_context = 40;
  Scheduler scheduler(*m.model, m.tokenizer.get(), kCtx, options);
  Scheduler without_tokenizer(*m.model, nullptr, kCtx, {});
  auto expect_refused = [](Scheduler& s, ServeRequest r, const std::string& fragment) {
    Collected sink;
    try {
      s.submit(std::move(r), sink.sink());
      ADD_FAILURE() << "accepted; expected an error containing '" << fragment << "'";
    } catch (const QueueFull&) {
      ADD_FAILURE() << "QueueFull instead of a validation error";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
    }
  };
  const ServeRequest good = make_request(tokens(5, 80), 4, {"Greedy", 0.0f, false}, 0);
  ServeRequest r = good;
  r.prompt.clear();
  expect_refused(scheduler, r, "prompt is empty");
  r = good;
  r.prompt[2] = 512;
  expect_refused(scheduler, r, "prompt token 512 at position 2 is outside the vocabulary");
  r.prompt[2] = -1;
  expect_refused(scheduler, r, "prompt token -1");
  r = good;
  r.max_tokens = -1;
  expect_refused(scheduler, r, "max_tokens must be >= 0");
  r = good;
  r.sampling.top_p = 1.5f;
  expect_refused(scheduler, r, "top_p must be in (0, 1]");
  r = good;
  r.sampling.temperature = -1.0f;
  expect_refused(scheduler, r, "temperature");
  r = good;
  r.n_probs = kMaxProbs + 1;
  expect_refused(scheduler, r, "n_probs must be in [0, 20]");
  r = good;
  r.max_tokens = 36;
  expect_refused(scheduler, r, "exceeds the context limit of 40 tokens");
  r = good;
  r.stop = {""};
  expect_refused(scheduler, r, "empty");
  r = good;
  r.stop = {"x"};
  expect_refused(without_tokenizer, r, "stop strings need a tokenizer");
  r = good;
  r.max_tokens = 35;  // exactly the limit
  Collected ok;
  EXPECT_NO_THROW(scheduler.submit(r, ok.sink()));
  EXPECT_THROW(scheduler.submit(good, ServeSink{}), Error);
  EXPECT_EQ(scheduler.metrics().requests_submitted, 1u);

  SchedulerOptions bad;
  bad.max_active = 0;
  EXPECT_THROW({ Scheduler s(*m.model, nullptr, kCtx, bad); }, Error);
  bad = {};
  bad.step_token_budget = 0;
  EXPECT_THROW({ Scheduler s(*m.model, nullptr, kCtx, bad); }, Error);
  scheduler.stop(false);  // before `ok`, whose sink gets the Error event, goes away
}

TEST(Scheduler, StopWithDrainFinishesEverythingAndWithoutSendsErrors) {
  const TextModel& m = text_model();
  const Mode greedy{"Greedy", 0.0f, false};
  SchedulerOptions options;
  options.max_active = 2;
  {
    Scheduler scheduler(*m.model, m.tokenizer.get(), kCtx, options);
    std::vector<Collected> got(3);
    std::vector<ServeRequest> requests;
    for (size_t i = 0; i < got.size(); ++i) {
      requests.push_back(make_request(tokens(4, 90 + i), 5, greedy, 0));
      scheduler.submit(requests[i], got[i].sink());
    }
    scheduler.step();
    scheduler.stop(true);
    for (size_t i = 0; i < got.size(); ++i) expect_same(got[i], reference_run(m, requests[i]), "drained");
    EXPECT_THROW(scheduler.submit(requests[0], got[0].sink()), Error);
  }
  {
    Scheduler scheduler(*m.model, m.tokenizer.get(), kCtx, options);
    std::vector<Collected> got(3);
    for (size_t i = 0; i < got.size(); ++i)
      scheduler.submit(no_eos(make_request(tokens(4, 95 + i), 50, greedy, 0)), got[i].sink());
    scheduler.step();
    scheduler.stop(false);
    for (size_t i = 0; i < got.size(); ++i) {
      EXPECT_FALSE(got[i].done.has_value());
      ASSERT_TRUE(got[i].error.has_value()) << i;
      EXPECT_NE(got[i].error->error.find("stopped"), std::string::npos);
    }
    EXPECT_EQ(got[0].tokens.size(), 1u);  // was running
    EXPECT_TRUE(got[2].tokens.empty());   // was waiting
    EXPECT_EQ(scheduler.metrics().requests_cancelled, 3u);
  }
}

TEST(Scheduler, TheBackgroundThreadServesRequestsFromOtherThreads) {
  const TextModel& m = text_model();
  const Mode seeded{"Seeded", 0.9f, true};
  SchedulerOptions options;
  options.max_active = 2;
  Scheduler scheduler(*m.model, m.tokenizer.get(), ComputeContext{2, best_isa()}, options);
  scheduler.start();
  std::vector<ServeRequest> requests;
  for (int i = 0; i < 4; ++i)
    requests.push_back(make_request(tokens(6 + static_cast<size_t>(i), 100 + i), 6, seeded, i));
  std::vector<Collected> got(requests.size());
  std::vector<std::promise<void>> finished(requests.size());
  std::vector<std::thread> clients;
  for (size_t i = 0; i < requests.size(); ++i) {
    clients.emplace_back([&, i] {
      ServeSink collect = got[i].sink();
      scheduler.submit(requests[i], [&, i, collect](const ServeEvent& e) {
        collect(e);
        if (e.kind != ServeEvent::Kind::Token) finished[i].set_value();
        return true;
      });
    });
  }
  for (auto& client : clients) client.join();
  for (auto& f : finished) f.get_future().wait();
  for (size_t i = 0; i < requests.size(); ++i) expect_same(got[i], reference_run(m, requests[i]), "threaded");
  scheduler.stop(true);
  const SchedulerMetrics metrics = scheduler.metrics();
  EXPECT_EQ(metrics.requests_finished, 4u);
  EXPECT_EQ(metrics.step_seconds_quantiles.size(), 3u);
  EXPECT_GT(metrics.step_seconds_sum, 0.0);
}

TEST(Scheduler, MetricsCountPromptCachedAndGeneratedTokens) {
  const TextModel& m = text_model();
  SchedulerOptions options;
  options.cache_every = 4;
  Scheduler scheduler(*m.model, m.tokenizer.get(), kCtx, options);
  const Mode greedy{"Greedy", 0.0f, false};
  ServeRequest a = make_request(tokens(10, 110), 3, greedy, 0);
  a.stop_at_eos = false;
  ServeRequest b = make_request(
      concat(std::vector<int32_t>(a.prompt.begin(), a.prompt.begin() + 9), tokens(2, 111)), 4, greedy, 0);
  b.stop_at_eos = false;
  Collected got_a, got_b;
  scheduler.submit(a, got_a.sink());
  run_until_idle(scheduler);
  scheduler.submit(b, got_b.sink());
  run_until_idle(scheduler);
  const SchedulerMetrics metrics = scheduler.metrics();
  EXPECT_EQ(metrics.requests_submitted, 2u);
  EXPECT_EQ(metrics.requests_finished, 2u);
  EXPECT_EQ(metrics.prompt_tokens, 21u);
  EXPECT_EQ(metrics.cached_prompt_tokens, 8u);
  EXPECT_EQ(got_b.done->cached_tokens, 8);
  EXPECT_EQ(metrics.generated_tokens, 7u);
  // a: 10 prompt + 3 decode rows, the last consuming its final token; b: 3 prompt + 4.
  EXPECT_EQ(metrics.step_rows, 20u);
  EXPECT_GE(metrics.cache_entries, 3u);  // a at 4 and 8 and its end, b's end
  EXPECT_GT(metrics.cache_bytes, 0u);
  EXPECT_EQ(metrics.waiting, 0u);
  EXPECT_EQ(metrics.active, 0u);
}

TEST(Scheduler, SavedAndRestoredSlotsResumeBitIdentically) {
  const TextModel& m = text_model();
  const Mode seeded{"Seeded", 0.9f, true};
  SchedulerOptions options;
  options.slot_save_path = test::make_temp_dir("slots");
  const std::vector<int32_t> prefix = tokens(14, 120);
  {
    Scheduler scheduler(*m.model, m.tokenizer.get(), kCtx, options);
    scheduler.save_prefix("conversation-1.slot", prefix);  // not cached: computed first
    scheduler.start();
    scheduler.save_prefix("again", prefix);  // through the background thread
    scheduler.stop(true);
  }
  EXPECT_EQ(read_text_file(options.slot_save_path + "/again"),
            read_text_file(options.slot_save_path + "/conversation-1.slot"));
  Scheduler restored(*m.model, m.tokenizer.get(), kCtx, options);
  EXPECT_EQ(restored.restore_prefix("conversation-1.slot"), prefix.size());
  const ServeRequest r = make_request(concat(prefix, tokens(3, 121)), 6, seeded, 9);
  Collected got;
  restored.submit(r, got.sink());
  run_until_idle(restored);
  expect_same(got, reference_run(m, r), "restored");
  EXPECT_EQ(got.done->cached_tokens, 14);
}

TEST(Scheduler, BadSlotNamesAndMalformedSlotFilesAreRefused) {
  const TextModel& m = text_model();
  SchedulerOptions options;
  options.slot_save_path = test::make_temp_dir("bad_slots");
  const std::string dir = options.slot_save_path;
  Scheduler scheduler(*m.model, m.tokenizer.get(), kCtx, options);
  const std::vector<int32_t> prefix = tokens(6, 130);
  auto expect_refused = [](const std::function<void()>& call, const std::string& fragment) {
    try {
      call();
      ADD_FAILURE() << "accepted; expected an error containing '" << fragment << "'";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
    }
  };
  for (const std::string& name :
       std::vector<std::string>{"", "..", "../escape", "a/b", ".hidden", "sp ace", std::string(300, 'a')})
    expect_refused([&] { scheduler.save_prefix(name, prefix); }, "invalid slot name");
  expect_refused([&] { scheduler.restore_prefix("../x"); }, "invalid slot name");
  expect_refused([&] { scheduler.restore_prefix("missing"); }, "missing");
  expect_refused([&] { scheduler.save_prefix("empty", {}); }, "empty prefix");
  Scheduler disabled(*m.model, m.tokenizer.get(), kCtx, {});
  expect_refused([&] { disabled.save_prefix("x", prefix); }, "slot saving is disabled");

  scheduler.save_prefix("good", prefix);
  const std::string bytes = read_text_file(dir + "/good");
  auto write = [&](const std::string& name, const std::string& content) {
    std::ofstream(dir + "/" + name, std::ios::binary) << content;
    return name;
  };
  std::string flipped = bytes;
  flipped[bytes.size() / 2] ^= 0x10;
  expect_refused([&] { scheduler.restore_prefix(write("flipped", flipped)); }, "checksum");
  expect_refused([&] { scheduler.restore_prefix(write("truncated", bytes.substr(0, bytes.size() - 5))); },
                 "truncated");
  std::string huge_count = bytes;
  huge_count[12 + 7] = 0x7f;  // the token count's top byte
  expect_refused([&] { scheduler.restore_prefix(write("huge", huge_count)); }, "truncated");
  expect_refused([&] { scheduler.restore_prefix(write("text", "just some text, not a slot file at all")); },
                 "not a mambacpp slot file");
  SequenceState state = m.model->new_state();
  save_state(dir + "/plain.state", *m.model, state);
  expect_refused([&] { scheduler.restore_prefix("plain.state"); }, "not a mambacpp slot file");
  // A slot saved from another model.
  SchedulerOptions other_options = options;
  const TextModel& other = text_model(Architecture::Mamba2);
  Scheduler other_scheduler(*other.model, other.tokenizer.get(), kCtx, other_options);
  other_scheduler.save_prefix("other-model", prefix);
  expect_refused([&] { scheduler.restore_prefix("other-model"); }, "different model");
  EXPECT_EQ(scheduler.restore_prefix("good"), prefix.size());
}

TEST(TokenLogprobs, RawLogprobsAreTheLogSoftmaxOfTheLogits) {
  std::vector<float> logits = {1.0f, 3.0f, -2.0f, 3.0f, 0.5f, 100.0f};  // the last id is padding
  SamplingParams p;
  p.temperature = 0.0f;
  Sampler sampler(p, 5);
  const int32_t token = sampler.sample(logits, {});
  EXPECT_EQ(token, 1);  // ties go to the lower id
  const TokenLogprobs raw = token_logprobs(sampler, logits, token, 3, false);
  double sum = 0;
  for (int i = 0; i < 5; ++i) sum += std::exp(double(logits[i]) - 3.0);
  EXPECT_NEAR(raw.logprob, -std::log(sum), 1e-6);
  ASSERT_EQ(raw.top.size(), 3u);
  EXPECT_EQ(raw.top[0].token, 1);
  EXPECT_EQ(raw.top[1].token, 3);
  EXPECT_EQ(raw.top[2].token, 0);
  EXPECT_NEAR(raw.top[2].logprob, 1.0 - 3.0 - std::log(sum), 1e-6);
  // The greedy final distribution holds only the chosen token.
  const TokenLogprobs post = token_logprobs(sampler, logits, token, 3, true);
  EXPECT_EQ(post.logprob, 0.0f);
  ASSERT_EQ(post.top.size(), 1u);
  EXPECT_EQ(post.top[0].token, 1);
}

}  // namespace
}  // namespace mb

// SPDX-License-Identifier: MIT
// The shared prefix store (engine/prefix_store.h): a state written by one server is found by
// another on the longest stored prefix of a prompt, and resuming from it equals the cold run bit
// for bit; corrupt, truncated, foreign and mismatching files are skipped, never resumed from;
// servers writing the same name at once leave one whole file; eviction keeps the byte budget; and a
// scheduler resumes a conversation another one served, answering as a cold scheduler does.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <thread>

#include "common/mamba2_reference.h"
#include "common/model_fixture.h"
#include "common/test_util.h"
#include "engine/prefix_store.h"
#include "engine/scheduler.h"

namespace mb {
namespace {

using test::same_bits;

const Model& model_a() {
  static const auto model = [] {
    MakeModelOptions o;
    o.config = test::small_config(32, 2, 97);
    o.seed = 21;
    return Model::load(test::write_model(o, "prefix_store_a"));
  }();
  return *model;
}

const Model& model_b() {  // the same shape, other weights: another fingerprint
  static const auto model = [] {
    MakeModelOptions o;
    o.config = test::small_config(32, 2, 97);
    o.seed = 22;
    return Model::load(test::write_model(o, "prefix_store_b"));
  }();
  return *model;
}

void write_and_wait(PrefixStore& store, const Model& model, std::span<const int32_t> prefix) {
  store.save(prefix, test::state_after(model, prefix));
  store.flush();
}

std::vector<uint8_t> read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

size_t files_in(const std::string& dir) {
  return static_cast<size_t>(std::distance(std::filesystem::directory_iterator(dir), {}));
}

TEST(PrefixStore, AnotherServerResumesFromTheLongestStoredPrefixExactly) {
  const std::string dir = test::make_temp_dir("prefix_store_resume");
  const auto prompt = test::random_tokens(55, 97, 3);
  const std::span<const int32_t> all(prompt);
  PrefixStore writer(model_a(), {.folder = dir});
  write_and_wait(writer, model_a(), all.first(20));
  write_and_wait(writer, model_a(), all.first(40));
  EXPECT_EQ(writer.counters().written, 2u);
  write_and_wait(writer, model_a(), all.first(40));  // already there: not written again
  EXPECT_EQ(writer.counters().written, 2u);

  PrefixStore reader(model_a(), {.folder = dir});
  std::optional<SlotFile> slot = reader.find_longest(prompt, 1, prompt.size() - 1);
  ASSERT_TRUE(slot.has_value());
  EXPECT_EQ(slot->tokens.size(), 40u);
  const ComputeContext ctx{2, best_isa()};
  SequenceState cold = model_a().new_state();
  const auto cold_logits = test::prefill(model_a(), ctx, prompt, cold, {OutputKind::LogitsAll, 16});
  const std::vector<int32_t> rest(prompt.begin() + 40, prompt.end());
  const auto warm_logits = test::prefill(model_a(), ctx, rest, slot->state, {OutputKind::LogitsAll, 16});
  EXPECT_TRUE(same_bits(warm_logits, std::vector<float>(cold_logits.end() - 15 * 97, cold_logits.end())));
  EXPECT_TRUE(same_bits(slot->state.download(), cold.download()));

  // The bounds hold, and a prompt that leaves the stored prefixes at token 30 gets the 20-token one.
  EXPECT_EQ(reader.find_longest(prompt, 1, 39)->tokens.size(), 20u);
  EXPECT_FALSE(reader.find_longest(prompt, 41, 54).has_value());
  auto diverging = prompt;
  diverging[30] = (diverging[30] + 1) % 97;
  EXPECT_EQ(reader.find_longest(diverging, 1, 54)->tokens.size(), 20u);
  EXPECT_FALSE(reader.find_longest(test::random_tokens(30, 97, 9), 1, 29).has_value());
  EXPECT_EQ(reader.counters().hits, 3u);
  EXPECT_EQ(reader.counters().misses, 2u);
  EXPECT_EQ(reader.counters().rejected, 0u);
}

TEST(PrefixStore, DamagedForeignAndMismatchingFilesAreSkipped) {
  const std::string dir = test::make_temp_dir("prefix_store_damaged");
  const auto prompt = test::random_tokens(50, 97, 4);
  const std::span<const int32_t> all(prompt);
  PrefixStore store(model_a(), {.folder = dir});
  write_and_wait(store, model_a(), all.first(10));
  const std::string path = dir + "/" + store.file_name(all.first(30));
  const std::string good = dir + "/" + store.file_name(all.first(10));
  auto bytes = read_bytes(good);

  auto expect_skipped = [&](const std::vector<uint8_t>& contents, const char* what) {
    std::filesystem::remove(path);
    std::ofstream(path, std::ios::binary)
        .write(reinterpret_cast<const char*>(contents.data()), static_cast<std::streamsize>(contents.size()));
    const uint64_t rejected = store.counters().rejected;
    std::optional<SlotFile> slot = store.find_longest(prompt, 1, 49);
    ASSERT_TRUE(slot.has_value()) << what;
    EXPECT_EQ(slot->tokens.size(), 10u) << what;  // the good shorter file, not the damaged one
    EXPECT_EQ(store.counters().rejected, rejected + 1) << what;
    EXPECT_FALSE(std::filesystem::exists(path)) << what << ": the damaged file is removed";
  };
  // A 10-token file under the 30-token name: its tokens do not match the name's prefix length.
  expect_skipped(bytes, "another prefix");
  auto corrupt = bytes;
  corrupt[corrupt.size() / 2] ^= 0x40;
  expect_skipped(corrupt, "corrupt");
  expect_skipped(std::vector<uint8_t>(bytes.begin(), bytes.begin() + bytes.size() / 2), "truncated");
  expect_skipped({}, "empty");
  // Model B's file of the same prefix, under model A's name: the fingerprint refuses it.
  PrefixStore other(model_b(), {.folder = dir});
  write_and_wait(other, model_b(), all.first(30));
  EXPECT_NE(other.file_name(all.first(30)), store.file_name(all.first(30)));
  expect_skipped(read_bytes(dir + "/" + other.file_name(all.first(30))), "another model");
  // And model B never sees model A's files: its only candidate is its own.
  EXPECT_EQ(other.find_longest(prompt, 1, 49)->tokens.size(), 30u);
}

TEST(PrefixStore, ServersWritingTheSameNameAtOnceLeaveOneWholeFile) {
  const std::string dir = test::make_temp_dir("prefix_store_race");
  const auto prompt = test::random_tokens(25, 97, 5);
  const SequenceState state = test::state_after(model_a(), prompt);
  std::vector<std::thread> writers;
  for (int t = 0; t < 4; ++t)
    writers.emplace_back([&] {
      PrefixStore store(model_a(), {.folder = dir});
      for (int i = 0; i < 5; ++i) {
        // Each round removes the file first, so the writers really race on creating it.
        std::filesystem::remove(dir + "/" + store.file_name(prompt));
        store.save(prompt, state);
        store.flush();
      }
    });
  for (auto& writer : writers) writer.join();
  PrefixStore reader(model_a(), {.folder = dir});
  const std::string name = reader.file_name(prompt);
  for (const auto& entry : std::filesystem::directory_iterator(dir))  // no temporaries are left
    EXPECT_EQ(entry.path().filename().string(), name);
  const auto query = test::random_tokens(25, 97, 5);
  std::vector<int32_t> longer(query);
  longer.push_back(1);
  std::optional<SlotFile> slot = reader.find_longest(longer, 1, 25);
  ASSERT_TRUE(slot.has_value());
  EXPECT_TRUE(same_bits(slot->state.download(), state.download()));
}

TEST(PrefixStore, EvictionKeepsTheBudgetRemovingTheOldestFirst) {
  const std::string dir = test::make_temp_dir("prefix_store_evict");
  const auto prompt = test::random_tokens(40, 97, 6);
  const std::span<const int32_t> all(prompt);
  // Measure one file, then allow two and a half of them.
  uint64_t one = 0;
  {
    const std::string probe = test::make_temp_dir("prefix_store_evict_probe");
    PrefixStore store(model_a(), {.folder = probe});
    write_and_wait(store, model_a(), all.first(10));
    one = std::filesystem::file_size(probe + "/" + store.file_name(all.first(10)));
  }
  PrefixStore store(model_a(), {.folder = dir, .budget_bytes = one * 5 / 2 + 64});
  for (size_t length : {10, 11, 12, 13}) {
    write_and_wait(store, model_a(), all.first(length));
    std::this_thread::sleep_for(std::chrono::milliseconds(20));  // distinct modification times
  }
  EXPECT_EQ(files_in(dir), 2u);
  EXPECT_EQ(store.counters().evicted, 2u);
  EXPECT_TRUE(std::filesystem::exists(dir + "/" + store.file_name(all.first(13))));
  EXPECT_TRUE(std::filesystem::exists(dir + "/" + store.file_name(all.first(12))));

  PrefixStore capped(model_a(), {.folder = dir, .max_files = 1});
  write_and_wait(capped, model_a(), all.first(14));
  EXPECT_EQ(files_in(dir), 1u);
  EXPECT_TRUE(std::filesystem::exists(dir + "/" + store.file_name(all.first(14))));
}

struct Answer {
  std::vector<int32_t> tokens;
  std::vector<float> logprobs;
  int64_t cached = -1;
};

Answer serve(Scheduler& scheduler, const ServeRequest& request) {
  Answer answer;
  scheduler.submit(request, [&](const ServeEvent& e) {
    if (e.kind == ServeEvent::Kind::Token) {
      answer.tokens.push_back(e.token);
      answer.logprobs.push_back(e.logprob);
    }
    if (e.kind == ServeEvent::Kind::Done) answer.cached = e.cached_tokens;
    return true;
  });
  for (int i = 0; i < 10000 && scheduler.step(); ++i) {
  }
  return answer;
}

ServeRequest sampled_request(std::vector<int32_t> prompt, uint64_t seed) {
  ServeRequest r;
  r.prompt = std::move(prompt);
  r.max_tokens = 6;
  r.stop_at_eos = false;
  r.sampling.repeat_penalty = 1.5f;  // the history matters
  r.sampling.seed = seed;
  return r;
}

TEST(PrefixStore, ASchedulerResumesAConversationAnotherOneServedAsAColdOneAnswers) {
  const std::string dir = test::make_temp_dir("prefix_store_scheduler");
  SchedulerOptions persist;
  persist.slot_save_path = dir;
  persist.slot_persist = true;
  const ComputeContext ctx{1, best_isa()};
  const ServeRequest first = sampled_request(test::random_tokens(23, 97, 11), 1);
  std::vector<int32_t> history = first.prompt;
  {
    Scheduler home(model_a(), nullptr, ctx, persist);
    const Answer answer = serve(home, first);
    ASSERT_EQ(answer.tokens.size(), 6u);
    history.insert(history.end(), answer.tokens.begin(), answer.tokens.end());
  }                              // its store writes what is queued before it goes
  EXPECT_EQ(files_in(dir), 2u);  // the prompt's state and the conversation's end

  auto follow_up_prompt = history;
  for (int32_t token : test::random_tokens(5, 97, 12)) follow_up_prompt.push_back(token);
  const ServeRequest follow_up = sampled_request(follow_up_prompt, 2);
  Scheduler other(model_a(), nullptr, ctx, persist);
  const Answer resumed = serve(other, follow_up);
  EXPECT_EQ(resumed.cached, static_cast<int64_t>(history.size()));
  EXPECT_EQ(other.metrics().stored_prompt_tokens, history.size());
  EXPECT_EQ(other.metrics().store.hits, 1u);

  Scheduler cold(model_a(), nullptr, ctx, {});
  const Answer expected = serve(cold, follow_up);
  EXPECT_EQ(expected.cached, 0);
  EXPECT_EQ(resumed.tokens, expected.tokens);
  EXPECT_TRUE(same_bits(resumed.logprobs, expected.logprobs));

  SchedulerOptions no_folder;
  no_folder.slot_persist = true;
  EXPECT_THROW(Scheduler(model_a(), nullptr, ctx, no_folder), Error);
}

}  // namespace
}  // namespace mb

// SPDX-License-Identifier: MIT
// The prefix-state cache: a request resumed from a cached prefix computes exactly what the same
// request computes cold (memcmp), the longest usable prefix wins, prefixes are compared token by
// token, a prompt equal to a cached prefix resumes only from an entry that holds its logits, and the
// byte budget holds with least-recently-used eviction.
#include <gtest/gtest.h>

#include "common/mamba2_reference.h"
#include "common/model_fixture.h"
#include "common/test_util.h"
#include "engine/prefix_cache.h"

namespace mb {
namespace {

using test::same_bits;

const Model& model_for(Architecture arch) {
  static std::map<Architecture, std::unique_ptr<Model>> models;
  auto it = models.find(arch);
  if (it == models.end()) {
    MakeModelOptions o;
    o.config =
        arch == Architecture::Mamba2 ? test::mamba2_config(32, 16, 16, 2, 97) : test::small_config(32, 2, 97);
    o.seed = 21;
    it = models.emplace(arch, Model::load(test::write_model(o, "prefix_cache"))).first;
  }
  return *it->second;
}

class PrefixCacheExactness : public ::testing::TestWithParam<Architecture> {};

TEST_P(PrefixCacheExactness, AResumedRequestEqualsTheColdOneBitForBit) {
  const Model& model = model_for(GetParam());
  const ComputeContext ctx{2, best_isa()};
  const auto prompt = test::random_tokens(55, 97, 3);
  const std::span<const int32_t> conversation(prompt.data(), 40);  // the turns so far

  SequenceState cold = model.new_state();
  const auto cold_logits = test::prefill(model, ctx, prompt, cold, {OutputKind::LogitsAll, 16});

  PrefixStateCache cache(64 << 20);
  cache.put(conversation, test::state_after(model, conversation));
  SequenceState resumed = model.new_state();
  ASSERT_EQ(cache.lookup(prompt, resumed), 40u);
  EXPECT_EQ(resumed.position, 40);
  const std::vector<int32_t> rest(prompt.begin() + 40, prompt.end());
  const auto warm_logits = test::prefill(model, ctx, rest, resumed, {OutputKind::LogitsAll, 16});
  EXPECT_TRUE(same_bits(warm_logits, std::vector<float>(cold_logits.end() - 15 * 97, cold_logits.end())));
  EXPECT_TRUE(same_bits(resumed.download(), cold.download()));
  EXPECT_EQ(resumed.position, cold.position);
  EXPECT_EQ(cache.hits(), 1u);
}

INSTANTIATE_TEST_SUITE_P(Architectures, PrefixCacheExactness,
                         ::testing::Values(Architecture::Mamba1, Architecture::Mamba2), [](const auto& info) {
                           return info.param == Architecture::Mamba1 ? "Mamba1" : "Mamba2";
                         });

TEST(PrefixCache, TheLongestUsablePrefixWinsAndTokensAreCompared) {
  const Model& model = model_for(Architecture::Mamba1);
  const auto tokens = test::random_tokens(50, 97, 4);
  const std::span<const int32_t> all(tokens);
  PrefixStateCache cache(64 << 20);
  cache.put(all.first(10), test::state_after(model, all.first(10)));
  cache.put(all.first(30), test::state_after(model, all.first(30)));
  SequenceState state = model.new_state();
  EXPECT_EQ(cache.lookup(all, state), 30u);
  EXPECT_TRUE(same_bits(state.download(), test::state_after(model, all.first(30)).download()));
  // A request must keep a token to prefill: a cap below 30 falls back to the 10-token entry.
  EXPECT_EQ(cache.lookup(all, state, 29), 10u);
  EXPECT_TRUE(same_bits(state.download(), test::state_after(model, all.first(10)).download()));
  // The same length with one token changed is a different prefix.
  std::vector<int32_t> other(tokens.begin(), tokens.begin() + 30);
  other[5] = (other[5] + 1) % 97;
  EXPECT_EQ(cache.lookup(other, state, 29), 0u);
  EXPECT_EQ(cache.lookup(std::span<const int32_t>(other).first(9), state), 0u);
  EXPECT_EQ(cache.misses(), 2u);
  // Storing the same prefix again refreshes it instead of adding a copy.
  cache.put(all.first(10), test::state_after(model, all.first(10)));
  EXPECT_EQ(cache.entries(), 2u);
}

TEST(PrefixCache, APromptEqualToACachedPrefixNeedsTheEntrysLogits) {
  const Model& model = model_for(Architecture::Mamba1);
  const auto tokens = test::random_tokens(20, 97, 6);
  const std::span<const int32_t> all(tokens);
  PrefixStateCache cache(64 << 20);
  cache.put(all.first(8), test::state_after(model, all.first(8)));
  cache.put(all, test::state_after(model, all));
  SequenceState state = model.new_state();
  std::vector<float> logits = {1.0f};
  // Without a logits row the whole-prompt entry cannot start a request: the shorter one does.
  EXPECT_EQ(cache.lookup_resumable(all, state, logits), 8u);
  EXPECT_TRUE(logits.empty());
  EXPECT_EQ(cache.lookup(all, state), 20u);  // a state alone is enough for a slot

  SequenceState cold = model.new_state();
  const std::vector<float> last =
      test::prefill(model, ComputeContext{1, best_isa()}, tokens, cold, {OutputKind::LogitsLast, 0});
  const size_t bytes = cache.bytes();
  cache.put(all, cold, last);  // the entry gains its row
  EXPECT_EQ(cache.entries(), 2u);
  EXPECT_EQ(cache.bytes(), bytes + last.size() * sizeof(float));
  EXPECT_EQ(cache.lookup_resumable(all, state, logits), 20u);
  EXPECT_TRUE(same_bits(logits, last));
  EXPECT_TRUE(same_bits(state.download(), cold.download()));
  // A longer prompt resumes from the same entry and prefills the rest.
  std::vector<int32_t> longer = tokens;
  longer.push_back(5);
  EXPECT_EQ(cache.lookup_resumable(longer, state, logits), 20u);
  EXPECT_TRUE(logits.empty());
  // An entry too large for the budget with its row keeps the state it has.
  PrefixStateCache tight(state.bytes() + 20 * sizeof(int32_t));
  tight.put(all, cold);
  tight.put(all, cold, last);
  EXPECT_EQ(tight.entries(), 1u);
  EXPECT_EQ(tight.lookup_resumable(all, state, logits), 0u);
  EXPECT_EQ(tight.lookup(all, state), 20u);
}

TEST(PrefixCache, TheByteBudgetHoldsWithLeastRecentlyUsedEviction) {
  const Model& model = model_for(Architecture::Mamba1);
  const auto tokens = test::random_tokens(12, 97, 5);
  const std::span<const int32_t> all(tokens);
  const size_t entry = model.state_floats() * sizeof(float) + 4 * sizeof(int32_t);
  PrefixStateCache cache(2 * entry + entry / 2);  // room for two entries of 4 tokens
  const std::vector<int32_t> a(tokens.begin(), tokens.begin() + 4), b(tokens.begin() + 4, tokens.begin() + 8),
      c(tokens.begin() + 8, tokens.end());
  cache.put(a, test::state_after(model, a));
  cache.put(b, test::state_after(model, b));
  SequenceState state = model.new_state();
  EXPECT_EQ(cache.lookup(a, state), 4u);      // a is now the most recently used
  cache.put(c, test::state_after(model, c));  // evicts b
  EXPECT_EQ(cache.entries(), 2u);
  EXPECT_LE(cache.bytes(), cache.budget_bytes());
  EXPECT_EQ(cache.lookup(b, state), 0u);
  EXPECT_EQ(cache.lookup(a, state), 4u);
  EXPECT_EQ(cache.lookup(c, state), 4u);

  PrefixStateCache too_small(entry - 1);
  too_small.put(a, test::state_after(model, a));
  EXPECT_EQ(too_small.entries(), 0u);
  EXPECT_EQ(too_small.lookup(a, state), 0u);
  PrefixStateCache disabled(0);
  disabled.put(a, test::state_after(model, a));
  EXPECT_EQ(disabled.entries(), 0u);
}

}  // namespace
}  // namespace mb

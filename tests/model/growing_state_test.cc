// SPDX-License-Identifier: MIT
// States with a part that grows per position (the KV caches of attention blocks to come), through
// a test block that appends every position's residual row to its state (common/history_block.h):
// the part takes memory for the positions used, in blocks of kStateBlockPositions, never for a
// maximum context; prefill equals decode steps and chunks change nothing for it; and a fork, a
// state file, a slot file and the prefix cache hold exactly the used positions and continue
// bit for bit.
#include <gtest/gtest.h>

#include <filesystem>

#include "common/history_block.h"
#include "common/model_fixture.h"
#include "common/test_util.h"
#include "engine/prefix_cache.h"
#include "engine/slot_file.h"
#include "engine/state_file.h"

namespace mb {
namespace {

using test::same_bits;

const ComputeContext kCtx{2, best_isa()};
constexpr int64_t kWidth = 24;  // floats of history per position (of d_model 32)

std::unique_ptr<Model> history_model() {
  MakeModelOptions o;
  o.config = test::small_config(32, 2, 97);
  o.seed = 41;
  auto model = Model::load(test::write_model(o, "growing_state"));
  model->append_block(std::make_unique<test::HistoryBlock>(kWidth));
  return model;
}

const Model& model() {
  static const std::unique_ptr<Model> held = history_model();
  return *held;
}

std::vector<float> run(SequenceState& state, const std::vector<int32_t>& tokens, int64_t chunk,
                       OutputKind output = OutputKind::LogitsLast) {
  Workspace ws;
  std::vector<std::vector<float>> out;
  const SequenceInput input{&state, tokens, {}};
  model().forward(kCtx, std::span(&input, 1), {output, chunk}, ws, out);
  return out[0];
}

// The history rows of a state's host form (after the fixed region).
std::vector<float> history(const SequenceState& state) {
  const std::vector<float> host = state.download();
  return {host.begin() + static_cast<int64_t>(model().state_floats()), host.end()};
}

TEST(GrowingState, TheLayoutNamesTheGrowingPartAndTheHostFormHoldsTheUsedPositions) {
  const StateLayout& layout = model().state_layout();
  ASSERT_EQ(layout.n_layers(), 3);
  const StatePart& part = layout.layer(2).parts.at(0);
  EXPECT_EQ(part.name, "history");
  EXPECT_TRUE(part.grows);
  EXPECT_EQ(layout.shape().growing, std::vector<int64_t>{kWidth});
  EXPECT_NE(layout.describe().find("history [24] per position"), std::string::npos) << layout.describe();

  SequenceState state = model().new_state();
  EXPECT_EQ(state.floats(), model().state_floats());
  EXPECT_EQ(state.storage()->capacity(), 0);
  const auto tokens = test::random_tokens(10, 97, 1);
  run(state, tokens, 0);
  EXPECT_EQ(state.floats(), model().state_floats() + 10 * kWidth);
  EXPECT_EQ(state.bytes(), state.floats() * sizeof(float));
  EXPECT_EQ(state.storage()->capacity(), kStateBlockPositions);
  // The block changes no output: the logits are those of the same checkpoint without it.
  MakeModelOptions o;
  o.config = test::small_config(32, 2, 97);
  o.seed = 41;
  const auto plain = Model::load(test::write_model(o, "growing_state"));
  SequenceState plain_state = plain->new_state();
  Workspace ws;
  std::vector<std::vector<float>> out;
  const SequenceInput input{&plain_state, tokens, {}};
  plain->forward(kCtx, std::span(&input, 1), {OutputKind::LogitsLast, 0}, ws, out);
  SequenceState again = model().new_state();
  EXPECT_TRUE(same_bits(run(again, tokens, 0), out[0]));
  const std::vector<float> fixed = again.download();
  EXPECT_TRUE(same_bits(std::vector<float>(fixed.begin(), fixed.begin() + model().state_floats()),
                        plain_state.download()));
}

TEST(GrowingState, PrefillEqualsStepsAndChunksChangeNothingAcrossBlocksOfPositions) {
  // 300 positions cross the first block of 256.
  const auto tokens = test::random_tokens(300, 97, 2);
  SequenceState whole = model().new_state();
  const auto logits = run(whole, tokens, 0);
  EXPECT_EQ(whole.storage()->capacity(), 2 * kStateBlockPositions);
  ASSERT_EQ(history(whole).size(), 300u * kWidth);
  for (int64_t chunk : {1, 7, 256}) {
    SequenceState chunked = model().new_state();
    EXPECT_TRUE(same_bits(run(chunked, tokens, chunk), logits)) << "chunk " << chunk;
    EXPECT_TRUE(same_bits(chunked.download(), whole.download())) << "chunk " << chunk;
  }
  // Row t of the history is the residual stream after the Mamba layers at position t: the
  // prefix's own function, so a prefix's history is the longer run's first rows.
  SequenceState prefix = model().new_state();
  run(prefix, std::vector<int32_t>(tokens.begin(), tokens.begin() + 40), 0);
  const std::vector<float> all = history(whole), first = history(prefix);
  EXPECT_TRUE(same_bits(first, std::vector<float>(all.begin(), all.begin() + 40 * kWidth)));
}

TEST(GrowingState, AForkHoldsTheUsedPositionsAndContinuesExactly) {
  const auto tokens = test::random_tokens(300, 97, 3), more = test::random_tokens(20, 97, 4);
  SequenceState state = model().new_state();
  run(state, tokens, 64);
  const SequenceState fork = state;
  EXPECT_EQ(fork.floats(), state.floats());
  EXPECT_TRUE(same_bits(fork.download(), state.download()));
  // A state grows a block at a time (the blocks it has never move) and a copy holds the used
  // positions rounded up to a block: 769 positions reached in two calls take 4 blocks.
  SequenceState grown = model().new_state();
  run(grown, test::random_tokens(513, 97, 5), 0);
  EXPECT_EQ(grown.storage()->capacity(), 3 * kStateBlockPositions);
  run(grown, test::random_tokens(256, 97, 11), 0);
  EXPECT_EQ(grown.storage()->capacity(), 4 * kStateBlockPositions);
  const SequenceState copy = grown;
  EXPECT_EQ(copy.storage()->capacity(), 4 * kStateBlockPositions);
  EXPECT_EQ(copy.floats(), model().state_floats() + 769 * kWidth);
  EXPECT_TRUE(same_bits(copy.download(), grown.download()));
  SequenceState continued = fork;
  const auto a = run(state, more, 0), b = run(continued, more, 0);
  EXPECT_TRUE(same_bits(a, b));
  EXPECT_TRUE(same_bits(state.download(), continued.download()));
  EXPECT_EQ(continued.position, 320);
}

const HostState& host_state(const SequenceState& state) {
  const auto* host = dynamic_cast<const HostState*>(state.storage());
  EXPECT_NE(host, nullptr);
  return *host;
}

TEST(GrowingState, ForksShareTheFullBlocksReadOnlyAndEachContinuesAsIfAlone) {
  // 600 positions: blocks 0 and 1 are full, block 2 holds 88 positions.
  const auto tokens = test::random_tokens(600, 97, 12);
  const auto left = test::random_tokens(300, 97, 13), right = test::random_tokens(200, 97, 14);
  SequenceState state = model().new_state();
  run(state, tokens, 128);
  SequenceState fork = state;
  EXPECT_TRUE(host_state(fork).shares_block(host_state(state), 0));
  EXPECT_TRUE(host_state(fork).shares_block(host_state(state), 1));
  EXPECT_FALSE(host_state(fork).shares_block(host_state(state), 2));
  // Both go on from position 600, each writing only its own blocks: each equals a state that
  // ran the same positions alone, bit for bit, including every position's history row.
  const auto fork_logits = run(fork, right, 0), state_logits = run(state, left, 7);
  SequenceState alone_left = model().new_state(), alone_right = model().new_state();
  run(alone_left, tokens, 0);
  run(alone_right, tokens, 0);
  EXPECT_TRUE(same_bits(run(alone_left, left, 0), state_logits));
  EXPECT_TRUE(same_bits(run(alone_right, right, 0), fork_logits));
  EXPECT_TRUE(same_bits(state.download(), alone_left.download()));
  EXPECT_TRUE(same_bits(fork.download(), alone_right.download()));
  EXPECT_TRUE(host_state(fork).shares_block(host_state(state), 1));
  // A fork of the fork shares every block the fork has filled: block 2 too (800 used), which the
  // fork wrote after it was made and so holds alone.
  const SequenceState again = fork;
  EXPECT_TRUE(host_state(again).shares_block(host_state(state), 0));
  EXPECT_TRUE(host_state(again).shares_block(host_state(fork), 2));
  EXPECT_FALSE(host_state(again).shares_block(host_state(state), 2));
}

TEST(GrowingState, SequencesResumedFromOneCachedPrefixShareItsFullBlocks) {
  const auto tokens = test::random_tokens(520, 97, 15);
  SequenceState state = model().new_state();
  run(state, tokens, 0);
  PrefixStateCache cache(64u << 20);
  cache.put(tokens, state);
  std::vector<int32_t> longer = tokens;
  longer.push_back(3);
  SequenceState a = model().new_state(), b = model().new_state();
  ASSERT_EQ(cache.lookup(longer, a), tokens.size());
  ASSERT_EQ(cache.lookup(longer, b), tokens.size());
  for (int64_t block : {0, 1}) {
    EXPECT_TRUE(host_state(a).shares_block(host_state(b), block));
    EXPECT_TRUE(host_state(a).shares_block(host_state(state), block));
  }
  const std::vector<int32_t> one = {3}, other = {4};
  const auto from_a = run(a, one, 0), from_b = run(b, other, 0);
  SequenceState alone = model().new_state();
  run(alone, tokens, 0);
  EXPECT_TRUE(same_bits(run(alone, other, 0), from_b));
  EXPECT_TRUE(same_bits(run(state, one, 0), from_a));
  EXPECT_TRUE(same_bits(state.download(), a.download()));
}

TEST(GrowingState, AUsedPositionOfASharedBlockIsNeverWrittenAgain) {
  HostState state(StateShape{2, {3}});
  state.reserve(300);
  for (int64_t p = 0; p < 300; ++p) state.writable_row(0, p)[0] = static_cast<float>(p);
  const auto fork = state.clone(300);
  // Position 10 is in the shared block 0; 299 in block 1, which the clone copied.
  EXPECT_THROW(state.writable_row(0, 10), Error);
  state.writable_row(0, 299)[0] = -1.0f;
  EXPECT_EQ(static_cast<HostState&>(*fork).rows(0).row(299)[0], 299.0f);
  EXPECT_EQ(static_cast<HostState&>(*fork).rows(0).row(10)[0], 10.0f);
}

TEST(GrowingState, StateAndSlotFilesStoreTheUsedExtentAndRestoreExactly) {
  const auto tokens = test::random_tokens(270, 97, 6), more = test::random_tokens(9, 97, 7);
  SequenceState state = model().new_state();
  run(state, tokens, 0);
  const std::string dir = test::make_temp_dir("growing_state_files");
  save_state(dir + "/a.state", model(), state);
  // Header (40 bytes), the host form, the checksum.
  EXPECT_EQ(std::filesystem::file_size(dir + "/a.state"), 40 + state.bytes() + 8);
  SequenceState restored = load_state(dir + "/a.state", model());
  EXPECT_EQ(restored.position, 270);
  EXPECT_TRUE(same_bits(restored.download(), state.download()));
  EXPECT_TRUE(same_bits(run(restored, more, 0), run(state, more, 0)));
  EXPECT_TRUE(same_bits(restored.download(), state.download()));

  SequenceState prefix = model().new_state();
  run(prefix, tokens, 0);
  save_slot_file(dir + "/a.slot", model(), tokens, prefix);
  SlotFile slot = load_slot_file(dir + "/a.slot", model());
  EXPECT_EQ(slot.tokens, tokens);
  EXPECT_TRUE(same_bits(slot.state.download(), prefix.download()));
  EXPECT_TRUE(same_bits(run(slot.state, more, 0), run(prefix, more, 0)));
}

TEST(GrowingState, ThePrefixCacheChargesTheUsedExtentAndResumesExactly) {
  const auto tokens = test::random_tokens(50, 97, 8);
  SequenceState state = model().new_state();
  run(state, tokens, 0);
  PrefixStateCache cache(64u << 20);
  cache.put(tokens, state);
  EXPECT_EQ(cache.bytes(), tokens.size() * sizeof(int32_t) + state.bytes());
  std::vector<int32_t> longer = tokens;
  longer.push_back(5);
  SequenceState resumed = model().new_state();
  ASSERT_EQ(cache.lookup(longer, resumed), tokens.size());
  EXPECT_TRUE(same_bits(resumed.download(), state.download()));
  const std::vector<int32_t> next = {5};
  EXPECT_TRUE(same_bits(run(resumed, next, 0), run(state, next, 0)));
}

TEST(GrowingState, AStateOfTheWrongExtentIsRefusedNamingTheLayout) {
  const std::string dir = test::make_temp_dir("growing_state_refused");
  SequenceState state = model().new_state();
  run(state, test::random_tokens(5, 97, 9), 0);
  // A fixed-only host state of the model's fixed size lacks the history part.
  SequenceState flat(std::vector<float>(model().state_floats(), 0.0f), 0);
  const auto tokens = test::random_tokens(2, 97, 10);
  try {
    run(flat, tokens, 0);
    ADD_FAILURE() << "a state without the growing part was accepted";
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find("per position"), std::string::npos) << error.what();
  }
  EXPECT_THROW(model().state_from_host(std::vector<float>(model().state_floats() + kWidth - 1, 0.0f), 1, "x"),
               Error);
  EXPECT_NO_THROW(model().state_from_host(std::vector<float>(model().state_floats() + kWidth, 0.0f), 1, "x"));
}

}  // namespace
}  // namespace mb

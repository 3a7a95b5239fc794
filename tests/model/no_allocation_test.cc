// SPDX-License-Identifier: MIT
// Once warmed up, a forward call (prefill in chunks, decode step, batch) allocates nothing on
// the heap: every buffer lives in the Workspace or the caller's outputs and is reused.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <new>

#include "common/hybrid_configs.h"
#include "common/model_fixture.h"
#include "common/test_util.h"

namespace {
std::atomic<bool> counting{false};
std::atomic<long> allocations{0};
}  // namespace

// Counting replacements of the global allocation functions for this test binary.
void* operator new(std::size_t size) {
  if (counting.load(std::memory_order_relaxed)) allocations.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(size == 0 ? 1 : size)) return p;
  throw std::bad_alloc();
}
// The nothrow form (std::stable_sort's temporary buffer uses it) must come from the same
// malloc as the others: a sanitizer's own nothrow new would otherwise meet our free.
void* operator new(std::size_t size, const std::nothrow_t&) noexcept {
  if (counting.load(std::memory_order_relaxed)) allocations.fetch_add(1, std::memory_order_relaxed);
  return std::malloc(size == 0 ? 1 : size);
}
void operator delete(void* p, const std::nothrow_t&) noexcept {
  std::free(p);
}
void operator delete(void* p) noexcept {
  std::free(p);
}
void operator delete(void* p, std::size_t) noexcept {
  std::free(p);
}

namespace mb {
namespace {

void expect_forward_allocates_nothing_once_warm(const ModelConfig& config) {
  MakeModelOptions o;
  o.config = config;
  const auto model = Model::load(test::write_model(o, "noalloc"));
  const auto prompt_a = test::random_tokens(100, 131, 1), prompt_b = test::random_tokens(37, 131, 2);
  for (int threads : {1, 2}) {
    const ComputeContext ctx{threads, best_isa()};
    Workspace ws;
    std::vector<std::vector<float>> out;
    std::vector<SequenceState> states(2, model->new_state());
    auto run_all = [&] {
      SequenceInput batch[2] = {{&states[0], prompt_a, {}}, {&states[1], prompt_b, {}}};
      model->forward(ctx, batch, {OutputKind::LogitsLast, 16}, ws, out);
      const int32_t next[2] = {3, 4};
      SequenceInput step[2] = {{&states[0], std::span(&next[0], 1), {}},
                               {&states[1], std::span(&next[1], 1), {}}};
      model->forward(ctx, step, {OutputKind::LogitsLast, 0}, ws, out);
    };
    run_all();  // warm-up sizes every buffer
    allocations = 0;
    counting = true;
    ::operator delete(::operator new(16));  // the counter itself works (explicit calls are not elided)
    ASSERT_EQ(allocations.exchange(0), 1);
    run_all();
    counting = false;
    EXPECT_EQ(allocations.load(), 0) << "threads " << threads;
  }
}

TEST(Workspace, ForwardAllocatesNothingOnceWarm) {
  // Plain Mamba-1 and FalconMamba (whose mixer norm runs in place in the same scratch).
  for (bool falcon : {false, true}) {
    SCOPED_TRACE(falcon ? "FalconMamba" : "Mamba-1");
    ModelConfig config = test::small_config(48, 2, 131);
    config.ssm.mixer_rms_norm = falcon;
    expect_forward_allocates_nothing_once_warm(config);
  }
}

TEST(Workspace, MixtureOfExpertsForwardAllocatesNothingOnceWarm) {
  // Nemotron-H's Mamba-2, MoE and MLP blocks (attention's KV cache grows with the positions).
  expect_forward_allocates_nothing_once_warm(test::nemotron_moe_config("MEE-", 9, 3, 24, 48));
}

TEST(Workspace, LongInputsRunInMemoryBoundedByTheChunk) {
  MakeModelOptions o;
  o.config = test::small_config(16, 1, 64);
  const auto model = Model::load(test::write_model(o, "long_input"));
  const auto tokens = test::random_tokens(100000, 64, 7);
  SequenceState state = model->new_state();
  Workspace ws;
  std::vector<std::vector<float>> out;
  SequenceInput input{&state, tokens, {}};
  model->forward(ComputeContext{1, best_isa()}, std::span(&input, 1), {OutputKind::LogitsLast, 256}, ws, out);
  EXPECT_EQ(state.position, 100000);
  ASSERT_EQ(out[0].size(), 64u);
  // Scratch holds one round of 256 positions (a few KiB per row here), not 100000.
  EXPECT_LT(ws.bytes(), 256u * 1024u * sizeof(float));
  EXPECT_GT(ws.bytes(), 0u);
}

}  // namespace
}  // namespace mb

// SPDX-License-Identifier: MIT
// The bitwise contract: prefill of T positions equals T decode steps (logits at every
// position and the final state), for any thread count, chunk size and batch composition.
// Every comparison is memcmp. Mamba-1 and FalconMamba (Mamba-1 plus the mixer norm) run the
// same suite, with weights stored as f32, bf16 or f16, and quantized at load (Q8_0, Q4_0, Q4_K,
// Q6_K: a wider model, so that its rows are whole K-quant blocks).
#include <gtest/gtest.h>

#include "common/model_fixture.h"
#include "common/test_util.h"

namespace mb {
namespace {

using test::same_bits;

struct Fixture {
  std::string dir;
  std::unique_ptr<Model> model;
};

enum class Variant { Mamba1, FalconMamba };

struct ExactnessCase {
  Variant variant;
  DType dtype;  // stored, or (quantized) loaded from f32
};

const Fixture& fixture_for(DType dtype, Variant variant = Variant::Mamba1) {
  static std::map<std::pair<Variant, DType>, Fixture> fixtures;
  auto it = fixtures.find({variant, dtype});
  if (it == fixtures.end()) {
    const bool quantized = dtype_is_quantized(dtype);
    MakeModelOptions o;
    o.config = test::small_config(quantized ? 256 : 48, 2, 131);
    o.config.ssm.d_state = 16;
    o.config.ssm.mixer_rms_norm = variant == Variant::FalconMamba;
    o.dtype = quantized ? DType::F32 : dtype;
    o.seed = 11;
    Fixture f;
    f.dir = test::write_model(o, "exact");
    LoadOptions load;
    if (quantized) load.weight_dtype = dtype;
    f.model = Model::load(f.dir, load);
    EXPECT_EQ(f.model->matrix_dtype(), dtype);
    EXPECT_EQ(f.model->config().ssm.mixer_rms_norm, o.config.ssm.mixer_rms_norm);
    it = fixtures.emplace(std::pair{variant, dtype}, std::move(f)).first;
  }
  return it->second;
}

const Fixture& fixture_for(const ExactnessCase& c) {
  return fixture_for(c.dtype, c.variant);
}

std::vector<float> prefill(const Model& model, const ComputeContext& ctx, const std::vector<int32_t>& tokens,
                           SequenceState& state, OutputKind kind, int64_t chunk) {
  return test::prefill(model, ctx, tokens, state, {kind, chunk});
}

class Exactness : public ::testing::TestWithParam<ExactnessCase> {};

TEST_P(Exactness, PrefillEqualsDecodeStepsForEveryLengthUpTo300) {
  const Model& model = *fixture_for(GetParam()).model;
  const ComputeContext ctx{1, best_isa()};
  const int64_t V = model.config().vocab_size;
  const auto tokens = test::random_tokens(300, V, 3);
  // Decode once, remembering the state after every step.
  std::vector<SequenceState> states;
  SequenceState state = model.new_state();
  const std::vector<float> step_all = test::step_logits(model, ctx, tokens, state, &states);
  // Every length natively; in a sampled run every length up to 32, then every 29th, and 300.
  for (int64_t T = 1; T <= 300; T += (test::sampled_sweeps() && T >= 32 && T + 29 <= 300) ? 29 : 1) {
    SequenceState fresh = model.new_state();
    const std::vector<int32_t> prompt(tokens.begin(), tokens.begin() + T);
    const auto logits =
        prefill(model, ctx, prompt, fresh, T % 3 == 0 ? OutputKind::LogitsAll : OutputKind::LogitsLast, 0);
    const std::vector<float> expected =
        T % 3 == 0 ? std::vector<float>(step_all.begin(), step_all.begin() + T * V)
                   : std::vector<float>(step_all.begin() + (T - 1) * V, step_all.begin() + T * V);
    ASSERT_TRUE(same_bits(logits, expected)) << "logits differ at T=" << T;
    ASSERT_TRUE(same_bits(fresh.download(), states[T - 1].download())) << "state differs at T=" << T;
    ASSERT_EQ(fresh.position, T);
  }
}

TEST_P(Exactness, ThreadCountsAndChunkSizesChangeNoBit) {
  const Model& model = *fixture_for(GetParam()).model;
  const auto tokens = test::random_tokens(150, model.config().vocab_size, 4);
  SequenceState base_state = model.new_state();
  const auto base =
      prefill(model, ComputeContext{1, best_isa()}, tokens, base_state, OutputKind::LogitsAll, 0);
  // A sampled run takes a sample: one-position rounds are what the length sweep above runs.
  const std::vector<int> thread_counts =
      test::sampled_sweeps() ? std::vector<int>{1, 3} : std::vector<int>{1, 2, 3};
  const std::vector<int64_t> chunks =
      test::sampled_sweeps() ? std::vector<int64_t>{0, 7, 64} : std::vector<int64_t>{0, 1, 7, 64, 150};
  for (int threads : thread_counts) {
    for (int64_t chunk : chunks) {
      SequenceState state = model.new_state();
      const auto got =
          prefill(model, ComputeContext{threads, best_isa()}, tokens, state, OutputKind::LogitsAll, chunk);
      EXPECT_TRUE(same_bits(got, base)) << "threads " << threads << " chunk " << chunk;
      EXPECT_TRUE(same_bits(state.download(), base_state.download())) << "threads " << threads << " chunk " << chunk;
    }
  }
  // Every instruction set gives the same bits too.
  for (Isa isa : test::supported_isas()) {
    SequenceState state = model.new_state();
    EXPECT_TRUE(
        same_bits(prefill(model, ComputeContext{2, isa}, tokens, state, OutputKind::LogitsAll, 64), base))
        << isa_name(isa);
  }
}

TEST_P(Exactness, EachSequenceOfABatchEqualsItAlone) {
  const Model& model = *fixture_for(GetParam()).model;
  const ComputeContext ctx{2, best_isa()};
  const std::vector<size_t> lengths = {1, 5, 17, 64, 3};
  std::vector<std::vector<int32_t>> prompts;
  for (size_t i = 0; i < lengths.size(); ++i)
    prompts.push_back(test::random_tokens(lengths[i], model.config().vocab_size, 20 + i));

  for (OutputKind kind :
       {OutputKind::LogitsLast, OutputKind::LogitsAll, OutputKind::HiddenMean, OutputKind::HiddenAll}) {
    for (int64_t chunk : {0, 4}) {
      std::vector<SequenceState> states(prompts.size(), model.new_state());
      std::vector<SequenceInput> batch;
      for (size_t i = 0; i < prompts.size(); ++i) batch.push_back({&states[i], prompts[i], {}});
      Workspace ws;
      std::vector<std::vector<float>> batched;
      model.forward(ctx, batch, {kind, chunk}, ws, batched);
      for (size_t i = 0; i < prompts.size(); ++i) {
        SequenceState alone = model.new_state();
        const auto solo = prefill(model, ComputeContext{1, best_isa()}, prompts[i], alone, kind, 0);
        EXPECT_TRUE(same_bits(batched[i], solo)) << "sequence " << i << " chunk " << chunk;
        EXPECT_TRUE(same_bits(states[i].download(), alone.download())) << "sequence " << i;
      }
    }
  }

  // Then decode steps as a batch of 5 (different tokens each step) against each sequence alone.
  test::expect_batched_steps_equal_solo(model, ctx, prompts.size(), 12);
}

TEST_P(Exactness, PrefillThenDecodeContinuesLikeDecodeAllTheWay) {
  test::expect_prefill_then_decode_equals_decode(*fixture_for(GetParam()).model,
                                                 ComputeContext{2, best_isa()}, {OutputKind::None, 8});
}

std::vector<ExactnessCase> exactness_cases() {
  std::vector<ExactnessCase> cases;
  for (Variant variant : {Variant::Mamba1, Variant::FalconMamba})
    for (DType dtype : {DType::F32, DType::BF16, DType::F16}) cases.push_back({variant, dtype});
  for (DType dtype : {DType::Q8_0, DType::Q4_0, DType::Q4_K, DType::Q6_K})
    cases.push_back({Variant::Mamba1, dtype});
  cases.push_back({Variant::FalconMamba, DType::Q4_K});
  return cases;
}

INSTANTIATE_TEST_SUITE_P(Storage, Exactness, ::testing::ValuesIn(exactness_cases()), [](const auto& info) {
  const std::string variant = info.param.variant == Variant::FalconMamba ? "FalconMamba_" : "";
  return variant + std::string(dtype_name(info.param.dtype));
});

TEST(Mamba1Model, RejectsBadInputsWithoutTouchingState) {
  const Model& model = *fixture_for(DType::F32).model;
  SequenceState state = model.new_state();
  const auto before = state.download();
  Workspace ws;
  std::vector<std::vector<float>> out;
  const std::vector<int32_t> bad = {1, 2, static_cast<int32_t>(model.config().vocab_size)};
  SequenceInput input{&state, bad, {}};
  try {
    model.forward(ComputeContext{}, std::span(&input, 1), {}, ws, out);
    FAIL() << "out-of-range token accepted";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("outside the vocabulary"), std::string::npos) << e.what();
  }
  const std::vector<int32_t> negative = {-1};
  input.tokens = negative;
  EXPECT_THROW(model.forward(ComputeContext{}, std::span(&input, 1), {}, ws, out), std::runtime_error);
  input.tokens = {};
  EXPECT_THROW(model.forward(ComputeContext{}, std::span(&input, 1), {}, ws, out), std::runtime_error);
  EXPECT_TRUE(same_bits(state.download(), before));
  EXPECT_EQ(state.position, 0);
}

}  // namespace
}  // namespace mb

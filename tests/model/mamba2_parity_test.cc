// SPDX-License-Identifier: MIT
// Mamba-2 engine logits against the double-precision reference (tests/common/mamba2_reference)
// over awkward shapes and both checkpoint layouts: max |diff| <= 1e-4 x max |logit| at every one
// of 32 positions, for decode steps, the sequential prefill and the chunked prefill; and the
// chunked SSD prefill within 1e-5 of the sequential prefill.
#include <gtest/gtest.h>

#include "common/mamba2_reference.h"
#include "common/model_fixture.h"
#include "common/parity.h"
#include "common/tensor_io.h"
#include "common/test_util.h"

namespace mb {
namespace {

using test::ParityCase;

std::vector<ParityCase> mamba2_parity_cases() {
  std::vector<ParityCase> cases;
  auto add = [&](std::string name, std::function<void(MakeModelOptions&)> tweak,
                 std::optional<DType> load = {}) {
    MakeModelOptions o;
    o.config = test::mamba2_config();
    o.seed = cases.size() + 31;
    tweak(o);
    cases.push_back({std::move(name), o, load});
  };
  // d_model 64 -> d_inner 128: headdim 16 gives 8 heads, 64 gives 2.
  for (int64_t g : {1, 2, 8}) add("groups_" + std::to_string(g), [g](auto& o) { o.config.ssm.ngroups = g; });
  add("headdim_64", [](auto& o) { o.config.ssm.headdim = 64; });
  for (int64_t n : {1, 64, 128}) add("d_state_" + std::to_string(n), [n](auto& o) { o.config.ssm.d_state = n; });
  add("six_heads_partial_vectors", [](auto& o) {
    o.config.d_model = 72;  // d_inner 144 = 6 heads of 24
    o.config.ssm.headdim = 24;
    o.config.ssm.ngroups = 3;
  });
  add("d_conv_2", [](auto& o) { o.config.ssm.d_conv = 2; });
  add("use_bias", [](auto& o) { o.config.ssm.use_bias = true; });
  add("no_conv_bias", [](auto& o) { o.config.ssm.use_conv_bias = false; });
  add("no_gated_norm_original", [](auto& o) {
    o.config.ssm.gated_norm = false;
    o.form = ConfigForm::Original;
  });
  add("dt_limit", [](auto& o) {
    o.config.ssm.dt_limit_min = 0.01;
    o.config.ssm.dt_limit_max = 0.05;
  });
  add("untied_odd_vocab", [](auto& o) {
    o.config.tie_embeddings = false;
    o.config.vocab_size = 101;
  });
  add("original_layout", [](auto& o) { o.form = ConfigForm::Original; });
  add("sharded_3", [](auto& o) { o.shards = 3; });
  add("stored_bf16", [](auto& o) { o.dtype = DType::BF16; });
  add("stored_f16", [](auto& o) { o.dtype = DType::F16; });
  add(
      "f32_loaded_as_bf16", [](auto&) {}, DType::BF16);
  return cases;
}

// Worst max|diff| / max|logit| against the reference over 32 positions, for decode steps and for
// the sequential and the chunked prefill (SSD chunks of 8: four chunks, so the state passing
// between chunks is exercised).
struct ParityResult {
  double steps, sequential, chunked;
};

ParityResult parity(const std::string& dir, std::optional<DType> load_dtype) {
  auto model = Model::load(dir, {load_dtype, {}});
  const DType* round_to = load_dtype ? &*load_dtype : nullptr;
  test::Mamba2Reference reference(dir, round_to);
  EXPECT_EQ(model->config().vocab_size, reference.vocab_size());
  const int64_t V = model->config().vocab_size;
  const auto tokens = test::random_tokens(32, V, 7);
  std::vector<std::vector<double>> expected;
  for (int32_t token : tokens) expected.push_back(reference.step(token));
  const ComputeContext ctx{2, best_isa()};
  SequenceState state = model->new_state();
  ParityResult r;
  r.steps = test::worst_step_ratio(expected, test::step_logits(*model, ctx, tokens, state), V);
  for (ScanForm scan : {ScanForm::Sequential, ScanForm::Chunked}) {
    SequenceState fresh = model->new_state();
    const auto logits = test::prefill(*model, ctx, tokens, fresh, {OutputKind::LogitsAll, 0, scan, 8});
    (scan == ScanForm::Chunked ? r.chunked : r.sequential) = test::worst_step_ratio(expected, logits, V);
  }
  return r;
}

void expect_parity(const std::string& dir, std::optional<DType> load_dtype, const std::string& name) {
  const ParityResult r = parity(dir, load_dtype);
  EXPECT_LE(r.steps, 1e-4);
  EXPECT_LE(r.sequential, 1e-4);
  EXPECT_LE(r.chunked, 1e-4);
  std::printf("[ parity ] %-26s worst max|diff|/max|logit|: steps %.3g, sequential %.3g, chunked %.3g\n",
              name.c_str(), r.steps, r.sequential, r.chunked);
}

class Mamba2Parity : public ::testing::TestWithParam<ParityCase> {};

TEST_P(Mamba2Parity, LogitsMatchDoubleReferenceOver32Positions) {
  const ParityCase& pc = GetParam();
  expect_parity(test::write_model(pc.options, "m2parity_" + pc.name), pc.load_dtype, pc.name);
}

INSTANTIATE_TEST_SUITE_P(Shapes, Mamba2Parity, ::testing::ValuesIn(mamba2_parity_cases()),
                         [](const auto& info) { return info.param.name; });

TEST(Mamba2Parity, DPerChannelCheckpointsMatchTheReference) {
  MakeModelOptions o;
  o.config = test::mamba2_config();
  o.seed = 77;
  const std::string dir = test::write_model(o, "m2parity_d_per_channel");
  // mamba_ssm's D_has_hdim stores D per channel: widen each head's D to its channels, varied.
  // The tensors' bytes only need to outlive the rewrite; moving an inner vector keeps its buffer.
  std::vector<std::vector<float>> storage;
  test::rewrite_tensors(dir, [&](std::vector<StoredTensor>& tensors) {
    for (StoredTensor& t : tensors) {
      if (t.name.find("mixer.D") == std::string::npos) continue;
      std::vector<float>& values = storage.emplace_back(o.config.ssm.d_inner);
      for (int64_t i = 0; i < o.config.ssm.d_inner; ++i) values[i] = 0.5f + 0.01f * static_cast<float>(i % 37);
      t.shape = {o.config.ssm.d_inner};
      t.data = reinterpret_cast<const uint8_t*>(values.data());
      t.byte_size = values.size() * sizeof(float);
    }
  });
  expect_parity(dir, std::nullopt, "d_per_channel");
}

TEST(Mamba2Chunked, ChunkedPrefillIsWithin1e5OfTheSequentialPrefill) {
  MakeModelOptions o;
  o.config = test::mamba2_config(64, 32, 16, 2, 131);
  o.seed = 5;
  auto model = Model::load(test::write_model(o, "m2chunked"));
  const ComputeContext ctx{2, best_isa()};
  for (int64_t T : {1, 31, 100, 257}) {
    const auto tokens = test::random_tokens(T, 131, T);
    SequenceState seq_state = model->new_state();
    const auto sequential = test::prefill(*model, ctx, tokens, seq_state, {OutputKind::LogitsAll, 0});
    for (int64_t ssd_chunk : {8, 32, 64}) {
      for (int64_t round : {0, 50}) {
        SequenceState state = model->new_state();
        const auto chunked = test::prefill(*model, ctx, tokens, state,
                                           {OutputKind::LogitsAll, round, ScanForm::Chunked, ssd_chunk});
        const double scale = test::max_abs(sequential);
        EXPECT_LE(test::max_abs_diff(sequential, chunked), 1e-5 * scale)
            << "T " << T << " ssd chunk " << ssd_chunk << " round " << round;
        EXPECT_LE(test::max_abs_diff(seq_state.download(), state.download()), 1e-5 * test::max_abs(seq_state.download()))
            << "T " << T << " ssd chunk " << ssd_chunk << " round " << round;
      }
    }
  }
}

}  // namespace
}  // namespace mb

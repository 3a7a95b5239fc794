// SPDX-License-Identifier: MIT
// Engine logits against the double-precision Mamba-3 reference (written from the spec) over the
// shapes of the Mamba-3 issue: max |diff| <= 1e-4 x max |logit| at every one of 32 positions,
// for decode steps, the sequential prefill and the chunked prefill.
#include <gtest/gtest.h>

#include <optional>

#include "common/mamba3_reference.h"
#include "common/model_fixture.h"
#include "common/parity.h"
#include "common/test_util.h"

namespace mb {
namespace {

using test::ParityCase;
using test::worst_step_ratio;

std::vector<ParityCase> mamba3_parity_cases() {
  std::vector<ParityCase> cases;
  auto add = [&](std::string name, std::function<void(ModelConfig&)> tweak, DType stored = DType::F32,
                 std::optional<DType> load = {}) {
    MakeModelOptions o;
    o.config = test::mamba3_config();
    o.seed = cases.size() + 1;
    o.dtype = stored;
    tweak(o.config);
    cases.push_back({std::move(name), o, load});
  };
  add("silu_gate", [](ModelConfig&) {});
  add("outproj_norm", [](ModelConfig& c) { c.ssm.is_outproj_norm = true; });
  add("ngroups_2", [](ModelConfig& c) {
    c.d_model = 128;
    c.ssm.ngroups = 2;
  });
  add("rope_1", [](ModelConfig& c) { c.ssm.rope_fraction = 1.0; });
  add("d_state_128", [](ModelConfig& c) { c.ssm.d_state = 128; });
  add("d_state_128_norm_groups_rope_1", [](ModelConfig& c) {
    c.d_model = 128;
    c.ssm.d_state = 128;
    c.ssm.ngroups = 2;
    c.ssm.rope_fraction = 1.0;
    c.ssm.is_outproj_norm = true;
  });
  add("headdim_16_groups_4", [](ModelConfig& c) {
    c.ssm.headdim = 16;
    c.ssm.ngroups = 4;
    c.ssm.is_outproj_norm = true;
  });
  add("headdim_8_d_state_10", [](ModelConfig& c) {  // partial vectors everywhere
    c.ssm.headdim = 8;
    c.ssm.d_state = 10;
  });
  add("no_rope_angles", [](ModelConfig& c) { c.ssm.d_state = 2; });  // floor(2 * 0.5) / 2 = 0 angles
  add("untied_odd_vocab", [](ModelConfig& c) {
    c.tie_embeddings = false;
    c.vocab_size = 101;
  });
  add(
      "stored_bf16", [](ModelConfig&) {}, DType::BF16);
  add(
      "f32_loaded_as_f16", [](ModelConfig& c) { c.ssm.is_outproj_norm = true; }, DType::F32, DType::F16);
  return cases;
}

class Mamba3Parity : public ::testing::TestWithParam<ParityCase> {};

TEST_P(Mamba3Parity, LogitsMatchDoubleReferenceOver32Positions) {
  const ParityCase& pc = GetParam();
  const std::string dir = test::write_model(pc.options, "m3parity_" + pc.name);
  auto model = Model::load(dir, {pc.load_dtype, {}});
  const DType* round_to = pc.load_dtype ? &*pc.load_dtype : nullptr;
  test::Mamba3Reference reference(dir, round_to);
  const int64_t V = model->config().vocab_size;
  ASSERT_EQ(V, reference.vocab_size());

  const auto tokens = test::random_tokens(32, V, 7);
  std::vector<std::vector<double>> expected;
  for (int32_t token : tokens) expected.push_back(reference.step(token));

  const ComputeContext ctx{2, best_isa()};
  SequenceState state = model->new_state();
  const double steps = worst_step_ratio(expected, test::step_logits(*model, ctx, tokens, state), V);
  double prefill[2];
  for (ScanForm scan : {ScanForm::Sequential, ScanForm::Chunked}) {
    SequenceState fresh = model->new_state();
    SequenceInput input{&fresh, tokens, {}};
    Workspace ws;
    std::vector<std::vector<float>> out;
    // SSD chunks of 8 positions: four chunks, so the state passing between chunks is exercised.
    model->forward(ctx, std::span(&input, 1), {OutputKind::LogitsAll, 0, scan, 8}, ws, out);
    prefill[scan == ScanForm::Chunked] = worst_step_ratio(expected, out[0], V);
  }
  EXPECT_LE(steps, 1e-4);
  EXPECT_LE(prefill[0], 1e-4);
  EXPECT_LE(prefill[1], 1e-4);
  std::printf("[ parity ] %-32s worst max|diff|/max|logit|: steps %.3g, sequential %.3g, chunked %.3g\n",
              pc.name.c_str(), steps, prefill[0], prefill[1]);
}

INSTANTIATE_TEST_SUITE_P(Shapes, Mamba3Parity, ::testing::ValuesIn(mamba3_parity_cases()),
                         [](const auto& info) { return info.param.name; });

}  // namespace
}  // namespace mb

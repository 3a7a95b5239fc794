// SPDX-License-Identifier: MIT
// Engine logits against the double-precision reference over the shapes and checkpoint forms
// of the foundation issue, for Mamba-1 and FalconMamba: max |diff| <= 1e-4 x max |logit| over
// 64 decode steps.
#include <gtest/gtest.h>

#include "common/mamba1_reference.h"
#include "common/model_fixture.h"
#include "common/parity.h"
#include "common/test_util.h"

namespace mb {
namespace {

using test::ParityCase;

std::vector<ParityCase> mamba1_parity_cases() {
  std::vector<ParityCase> cases;
  auto add = [&](std::string name, std::function<void(MakeModelOptions&)> tweak, std::optional<DType> load = {}) {
    MakeModelOptions o;
    o.config = test::small_config();
    o.seed = cases.size() + 1;
    tweak(o);
    cases.push_back({std::move(name), o, load});
  };
  for (int64_t n : {1, 16, 64, 128}) add("d_state_" + std::to_string(n), [n](auto& o) { o.config.ssm.d_state = n; });
  add("d_conv_2", [](auto& o) { o.config.ssm.d_conv = 2; });
  add("dt_rank_5", [](auto& o) { o.config.ssm.dt_rank = 5; });
  add("use_bias", [](auto& o) { o.config.ssm.use_bias = true; });
  add("no_conv_bias", [](auto& o) { o.config.ssm.use_conv_bias = false; });
  add("untied_odd_vocab", [](auto& o) {
    o.config.tie_embeddings = false;
    o.config.vocab_size = 101;
  });
  add("odd_width", [](auto& o) {
    o.config.d_model = 37;
    o.config.ssm.dt_rank = 3;
  });
  add("original_config_form", [](auto& o) { o.form = ConfigForm::Original; });
  add("sharded_3", [](auto& o) { o.shards = 3; });
  add("stored_bf16", [](auto& o) { o.dtype = DType::BF16; });
  add("stored_f16", [](auto& o) { o.dtype = DType::F16; });
  add("f32_loaded_as_bf16", [](auto&) {}, DType::BF16);
  add("f32_loaded_as_f16", [](auto&) {}, DType::F16);

  // FalconMamba: the same block with x_proj's outputs RMS-normalized, over the widths where that
  // norm is most fragile (one-element parts, where it reduces to a sign).
  auto add_falcon = [&](std::string name, std::function<void(MakeModelOptions&)> tweak,
                        std::optional<DType> load = {}) {
    auto falcon = [tweak](MakeModelOptions& o) {
      o.config.ssm.mixer_rms_norm = true;
      tweak(o);
    };
    add("falcon_" + name, falcon, load);
  };
  for (int64_t n : {1, 16, 64})
    add_falcon("d_state_" + std::to_string(n), [n](auto& o) { o.config.ssm.d_state = n; });
  add_falcon("dt_rank_1", [](auto& o) { o.config.ssm.dt_rank = 1; });
  add_falcon("odd_width", [](auto& o) {
    o.config.d_model = 37;
    o.config.ssm.dt_rank = 3;
  });
  add_falcon("untied_odd_vocab", [](auto& o) {
    o.config.tie_embeddings = false;
    o.config.vocab_size = 101;
  });
  add_falcon("stored_bf16", [](auto& o) { o.dtype = DType::BF16; });
  add_falcon("f32_loaded_as_bf16", [](auto&) {}, DType::BF16);
  return cases;
}

class Mamba1Parity : public ::testing::TestWithParam<ParityCase> {};

TEST_P(Mamba1Parity, LogitsMatchDoubleReferenceOver64Steps) {
  const ParityCase& pc = GetParam();
  const std::string dir = test::write_model(pc.options, "parity_" + pc.name);
  auto model = Model::load(dir, {pc.load_dtype, {}});
  const DType* round_to = pc.load_dtype ? &*pc.load_dtype : nullptr;
  test::Mamba1Reference reference(dir, round_to);
  ASSERT_EQ(model->config().vocab_size, reference.vocab_size());

  const auto tokens = test::random_tokens(64, pc.options.config.vocab_size, 7);
  SequenceState state = model->new_state();
  const auto logits = test::step_logits(*model, ComputeContext{2, best_isa()}, tokens, state);
  std::vector<std::vector<double>> expected;
  for (int32_t token : tokens) expected.push_back(reference.step(token));
  const double worst_ratio = test::worst_step_ratio(expected, logits, model->config().vocab_size);
  EXPECT_LE(worst_ratio, 1e-4);
  RecordProperty("worst_relative_diff", std::to_string(worst_ratio));
  std::printf("[ parity ] %-22s worst max|diff|/max|logit| = %.3g\n", pc.name.c_str(), worst_ratio);
}

INSTANTIATE_TEST_SUITE_P(Shapes, Mamba1Parity, ::testing::ValuesIn(mamba1_parity_cases()),
                         [](const auto& info) { return info.param.name; });

}  // namespace
}  // namespace mb

// SPDX-License-Identifier: MIT
// The sequence-model path: raw feature rows through input_proj, hidden states after norm_f at
// the last position, at every position, or mean-pooled, for one page or a batch of pages.
#include <gtest/gtest.h>

#include "common/mamba1_reference.h"
#include "common/model_fixture.h"
#include "common/test_util.h"
#include "core/error.h"

namespace mb {
namespace {

struct Pages {
  std::unique_ptr<Model> model;
  std::string dir;
  int64_t input_dim = 7;
};

const Pages& pages_model() {
  static Pages p = [] {
    Pages pages;
    MakeModelOptions o;
    o.config = test::small_config(32, 2, 16);
    o.input_dim = pages.input_dim;
    pages.dir = test::write_model(o, "pages");
    pages.model = Model::load(pages.dir);
    return pages;
  }();
  return p;
}

std::vector<float> run(const Model& model, const std::vector<float>& features, OutputKind kind, int64_t chunk,
                       int threads, SequenceState& state) {
  Workspace ws;
  std::vector<std::vector<float>> out;
  SequenceInput input{&state, {}, features};
  model.forward(ComputeContext{threads, best_isa()}, std::span(&input, 1), {kind, chunk}, ws, out);
  return out[0];
}

TEST(SequenceModel, HiddenStatesMatchTheDoubleReference) {
  const Pages& p = pages_model();
  ASSERT_EQ(p.model->input_dim(), p.input_dim);
  const int64_t T = 23, d = p.model->config().d_model;
  const auto features = test::random_floats(T * p.input_dim, 3);
  SequenceState state = p.model->new_state();
  const auto all = run(*p.model, features, OutputKind::HiddenAll, 0, 2, state);
  ASSERT_EQ(all.size(), static_cast<size_t>(T * d));
  test::Mamba1Reference reference(p.dir);
  std::vector<double> mean(d, 0.0);
  for (int64_t t = 0; t < T; ++t) {
    reference.step_features(std::vector<float>(features.begin() + t * p.input_dim, features.begin() + (t + 1) * p.input_dim));
    const auto expected = reference.hidden_after_norm();
    for (int64_t k = 0; k < d; ++k) {
      EXPECT_NEAR(all[t * d + k], expected[k], 1e-4) << "t=" << t << " k=" << k;
      mean[k] += expected[k] / T;
    }
  }
  SequenceState fresh = p.model->new_state();
  const auto pooled = run(*p.model, features, OutputKind::HiddenMean, 5, 1, fresh);
  for (int64_t k = 0; k < d; ++k) EXPECT_NEAR(pooled[k], mean[k], 1e-4);
  SequenceState again = p.model->new_state();
  const auto last = run(*p.model, features, OutputKind::HiddenLast, 0, 1, again);
  EXPECT_TRUE(test::same_bits(last, std::vector<float>(all.end() - d, all.end())));
}

TEST(SequenceModel, PagesAreChunkThreadAndBatchInvariantBitForBit) {
  const Pages& p = pages_model();
  const std::vector<int64_t> lengths = {1, 9, 40, 3};
  std::vector<std::vector<float>> pages;
  for (size_t i = 0; i < lengths.size(); ++i) pages.push_back(test::random_floats(lengths[i] * p.input_dim, 10 + i));
  for (OutputKind kind : {OutputKind::HiddenAll, OutputKind::HiddenMean, OutputKind::HiddenLast}) {
    std::vector<SequenceState> states(pages.size(), p.model->new_state());
    std::vector<SequenceInput> batch;
    for (size_t i = 0; i < pages.size(); ++i) batch.push_back({&states[i], {}, pages[i]});
    Workspace ws;
    std::vector<std::vector<float>> out;
    p.model->forward(ComputeContext{2, best_isa()}, batch, {kind, 4}, ws, out);
    for (size_t i = 0; i < pages.size(); ++i) {
      SequenceState alone = p.model->new_state();
      EXPECT_TRUE(test::same_bits(out[i], run(*p.model, pages[i], kind, 0, 1, alone))) << "page " << i;
      EXPECT_TRUE(test::same_bits(states[i].download(), alone.download()));
    }
  }
}

TEST(SequenceModel, MalformedFeatureInputsAreRefused) {
  const Pages& p = pages_model();
  SequenceState state = p.model->new_state();
  Workspace ws;
  std::vector<std::vector<float>> out;
  const std::vector<float> ragged(p.input_dim + 1, 0.5f);
  SequenceInput input{&state, {}, ragged};
  EXPECT_THROW(p.model->forward(ComputeContext{}, std::span(&input, 1), {OutputKind::HiddenLast, 0}, ws, out), Error);
  MakeModelOptions o;
  o.config = test::small_config(32, 1, 16);
  auto token_model = Model::load(test::write_model(o, "no_input_proj"));
  SequenceState token_state = token_model->new_state();
  const std::vector<float> features(32, 0.5f);
  SequenceInput feature_input{&token_state, {}, features};
  EXPECT_THROW(token_model->forward(ComputeContext{}, std::span(&feature_input, 1), {OutputKind::HiddenLast, 0}, ws, out),
               Error);
}

}  // namespace
}  // namespace mb

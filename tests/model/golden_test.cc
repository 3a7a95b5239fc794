// SPDX-License-Identifier: MIT
// Logits against goldens computed by another engine (llama.cpp, CPU, f32, one token per decode
// call) for small random checkpoints in the Hugging Face layout: tests/data/goldens/README.txt
// says how they were made. Both our prefill and our decode steps must agree with them within the
// README's tolerance (max |ours - golden| / max |golden| <= 1e-5) and pick the same argmax at
// every position. They guard against a convention misread both in the engine and in our own
// references (the Mamba-2 fixture has two groups, so a gated norm over the whole row fails it).
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <sstream>

#include "common/model_fixture.h"
#include "common/test_util.h"
#include "io/npy.h"
#include "model/model.h"

namespace mb {
namespace {

std::vector<int32_t> read_tokens(const std::string& path) {
  std::ifstream file(path);
  std::stringstream text;
  text << file.rdbuf();
  std::vector<int32_t> tokens;
  std::string item;
  // Comma- or space-separated ids (the hybrids' files use spaces).
  std::string all = text.str();
  for (char& ch : all)
    if (ch == ' ' || ch == '\n') ch = ',';
  std::stringstream ids(all);
  while (std::getline(ids, item, ','))
    if (!item.empty()) tokens.push_back(std::stoi(item));
  return tokens;
}

size_t argmax(const float* row, int64_t n) {
  size_t best = 0;
  for (int64_t i = 1; i < n; ++i)
    if (row[i] > row[best]) best = i;
  return best;
}

void expect_matches_golden(const std::vector<float>& ours, const std::vector<float>& golden, int64_t vocab,
                           const std::string& what, double tolerance) {
  ASSERT_EQ(ours.size(), golden.size()) << what;
  double peak = 0, diff = 0;
  for (size_t i = 0; i < golden.size(); ++i) {
    peak = std::max(peak, std::fabs(double(golden[i])));
    diff = std::max(diff, std::fabs(double(ours[i]) - golden[i]));
  }
  EXPECT_LE(diff / peak, tolerance) << what;
  for (size_t t = 0; t < golden.size() / vocab; ++t)
    EXPECT_EQ(argmax(ours.data() + t * vocab, vocab), argmax(golden.data() + t * vocab, vocab))
        << what << " position " << t;
  std::printf("[ golden ] %-28s max|diff|/max|golden| = %.3g\n", what.c_str(), diff / peak);
}

class Golden : public ::testing::TestWithParam<std::string> {};

TEST_P(Golden, PrefillAndDecodeStepsMatchTheOtherEngine) {
  const std::string dir = std::string(MB_TEST_DATA_DIR) + "/goldens/" + GetParam();
  const auto tokens = read_tokens(dir + "/tokens.txt");
  std::vector<int64_t> shape;
  const std::vector<float> golden = read_npy_f32(dir + "/logits.npy", shape);
  ASSERT_EQ(shape.size(), 2u);
  ASSERT_EQ(shape[0], static_cast<int64_t>(tokens.size()));
  auto model = Model::load(dir);
  ASSERT_EQ(model->config().vocab_size, shape[1]);
  const ComputeContext ctx{2, best_isa()};
  // llama.cpp L2-normalises Qwen3.5's q and k as x / max(|x|, eps), HF (and we) as
  // x * rsqrt(sum x^2 + 1e-6): that golden's README allows 2e-5.
  const double tolerance = GetParam() == "qwen3.5-dense" ? 2e-5 : 1e-5;

  SequenceState state = model->new_state();
  expect_matches_golden(test::prefill(*model, ctx, tokens, state, {OutputKind::LogitsAll, 0}), golden,
                        shape[1], GetParam() + " prefill", tolerance);
  SequenceState stepped = model->new_state();
  expect_matches_golden(test::step_logits(*model, ctx, tokens, stepped), golden, shape[1],
                        GetParam() + " steps", tolerance);
  if (model->config().arch == Architecture::Mamba2) {
    SequenceState chunked = model->new_state();
    expect_matches_golden(
        test::prefill(*model, ctx, tokens, chunked, {OutputKind::LogitsAll, 0, ScanForm::Chunked, 8}), golden,
        shape[1], GetParam() + " chunked SSD", tolerance);
  }
}

// The name of a golden folder as a test name.
std::string golden_case_name(const ::testing::TestParamInfo<std::string>& info) {
  std::string name = info.param;
  for (char& c : name)
    if (c == '-' || c == '.') c = '_';
  return name;
}

INSTANTIATE_TEST_SUITE_P(LlamaCpp, Golden,
                         ::testing::Values("mamba1-hf", "mamba2-hf-g2", "granite-4.0-h-dense",
                                           "nemotron-h-dense", "jamba-dense", "lfm2-dense"),
                         golden_case_name);

// Zamba2 runs in no other engine, and llama.cpp pairs Bamba's partially rotated channels
// differently: their goldens are a float64 implementation's of transformers' code (README.txt).
INSTANTIATE_TEST_SUITE_P(Float64Reference, Golden, ::testing::Values("zamba2", "bamba"), golden_case_name);

// Falcon-H1: attention || Mamba-2 with every muP multiplier far from 1, two groups in the gated
// norm (mamba_rms_norm, gate before norm: llama.cpp's only form), head_dim != hidden / heads.
INSTANTIATE_TEST_SUITE_P(FalconH1, Golden, ::testing::Values("falcon-h1"), golden_case_name);

// Qwen3.5: Gated DeltaNet and gated attention, from the vision-language layout (its vision tower
// and MTP layer skipped), nk < nv.
INSTANTIATE_TEST_SUITE_P(Qwen35, Golden, ::testing::Values("qwen3.5-dense"), golden_case_name);

}  // namespace
}  // namespace mb

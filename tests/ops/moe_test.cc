// SPDX-License-Identifier: MIT
// The mixture-of-experts op's routing rule and its reads (ops/moe.h); the op's arithmetic over
// awkward shapes is in the op registry (tests/common/op_cases_moe.cc).
#include <gtest/gtest.h>

#include <cmath>
#include <set>

#include "common/test_util.h"
#include "ops/matmul.h"
#include "ops/moe.h"

namespace mb {
namespace {

struct Routed {
  std::vector<int64_t> experts;
  std::vector<float> weights;
};

Routed route(const MoeParams& p, const std::vector<float>& logits, const std::vector<float>& bias = {},
             Isa isa = best_isa()) {
  std::vector<float> routes(2 * p.top_k, -1.0f);
  moe_route(ComputeContext{1, isa}, p, bias.empty() ? nullptr : bias.data(), logits.data(), p.n_experts, 1,
            routes.data(), 2 * p.top_k);
  Routed r;
  for (int64_t j = 0; j < p.top_k; ++j) {
    r.experts.push_back(static_cast<int64_t>(routes[j]));
    r.weights.push_back(routes[p.top_k + j]);
  }
  return r;
}

MoeParams params(int64_t experts, int64_t top_k, MoeScoring scoring, bool normalize = false,
                 float scale = 1.0f) {
  return {8, experts, top_k, 4, Activation::SwiGlu, scoring, normalize, scale};
}

TEST(MoeRouting, TheLargestScoresComeFirstTiesTakeTheLowerIndexAndNanRanksLast) {
  const std::vector<float> logits = {1.0f, 3.0f, 3.0f, NAN, 2.0f, 3.0f, -INFINITY};
  for (Isa isa : test::supported_isas()) {
    EXPECT_EQ(route(params(7, 4, MoeScoring::SoftmaxTopK), logits, {}, isa).experts,
              (std::vector<int64_t>{1, 2, 5, 4}))
        << isa_name(isa);
    // The whole order: -inf is a number, NaN after it.
    EXPECT_EQ(route(params(7, 7, MoeScoring::SoftmaxTopK), logits, {}, isa).experts,
              (std::vector<int64_t>{1, 2, 5, 4, 0, 6, 3}))
        << isa_name(isa);
  }
  // Every score equal: the first k experts, in order, with equal weights.
  const Routed all = route(params(5, 3, MoeScoring::SoftmaxTopK), std::vector<float>(5, 0.25f));
  EXPECT_EQ(all.experts, (std::vector<int64_t>{0, 1, 2}));
  for (float w : all.weights) EXPECT_FLOAT_EQ(w, 1.0f / 3.0f);
}

TEST(MoeRouting, GraniteWeighsTheChosenLogitsBySoftmax) {
  const Routed r = route(params(4, 2, MoeScoring::SoftmaxTopK), {0.5f, 2.0f, -1.0f, 1.0f});
  EXPECT_EQ(r.experts, (std::vector<int64_t>{1, 3}));
  EXPECT_NEAR(r.weights[0], 1.0 / (1.0 + std::exp(-1.0)), 1e-7);
  EXPECT_NEAR(r.weights[1], std::exp(-1.0) / (1.0 + std::exp(-1.0)), 1e-7);
}

TEST(MoeRouting, TheCorrectionBiasChoosesButTheSigmoidScoresWeigh) {
  // Without the bias expert 0 leads (sigmoid 0.88 against 0.5); with it expert 1 is chosen, and
  // weighs its own sigmoid score.
  const std::vector<float> logits = {2.0f, 0.0f, -3.0f}, bias = {0.0f, 1.0f, 0.0f};
  const Routed plain = route(params(3, 1, MoeScoring::SigmoidBias, false, 2.5f), logits, bias);
  EXPECT_EQ(plain.experts, (std::vector<int64_t>{1}));
  EXPECT_FLOAT_EQ(plain.weights[0], 0.5f * 2.5f);
  // Renormalized: one chosen expert weighs 1 (0.5 / (0.5 + 1e-20)), then the scale.
  const Routed normalized = route(params(3, 1, MoeScoring::SigmoidBias, true, 2.5f), logits, bias);
  EXPECT_FLOAT_EQ(normalized.weights[0], 2.5f);
  const Routed two = route(params(3, 2, MoeScoring::SigmoidBias, true, 2.5f), logits, bias);
  EXPECT_EQ(two.experts, (std::vector<int64_t>{1, 0}));
  const double s0 = 1.0 / (1.0 + std::exp(-2.0));
  EXPECT_NEAR(two.weights[0], 2.5 * 0.5 / (0.5 + s0), 1e-6);
  EXPECT_NEAR(two.weights[1], 2.5 * s0 / (0.5 + s0), 1e-6);
}

TEST(MoeRouting, JambaWeighsBySoftmaxOverEveryExpertWithoutRenormalizing) {
  const std::vector<float> logits = {0.0f, 1.0f, 2.0f};
  const Routed r = route(params(3, 2, MoeScoring::SoftmaxAll), logits);
  const double sum = 1.0 + std::exp(1.0) + std::exp(2.0);
  EXPECT_EQ(r.experts, (std::vector<int64_t>{2, 1}));
  EXPECT_NEAR(r.weights[0], std::exp(2.0) / sum, 1e-7);
  EXPECT_NEAR(r.weights[1], std::exp(1.0) / sum, 1e-7);
}

// The op over rows whose experts are known: every expert no row chose gets all-NaN weights, which
// any read would carry into the output. The output must keep the bits of the intact experts.
TEST(MoeExperts, OnlyTheChosenExpertsAreRead) {
  const int64_t d = 24, E = 9, width = 12;
  for (int64_t m : {1, 3}) {
    MoeParams p{d, E, 2, width, Activation::ReluSquared, MoeScoring::SigmoidBias, true, 2.5f};
    std::vector<std::vector<uint8_t>> packed;
    auto pack = [&](int64_t rows, int64_t cols, std::vector<float> values) {
      packed.push_back(pack_weights(values.data(), DType::F32, rows, cols, DType::F32));
      return WeightMatrix{packed.back().data(), DType::F32, rows, cols};
    };
    packed.reserve(4 * E + 1);
    const WeightMatrix router = pack(E, d, test::random_floats(E * d, 1));
    std::vector<WeightMatrix> up, down, poisoned_up, poisoned_down;
    for (int64_t e = 0; e < E; ++e) {
      up.push_back(pack(width, d, test::random_floats(width * d, 10 + e)));
      down.push_back(pack(d, width, test::random_floats(d * width, 30 + e)));
    }
    const std::vector<float> x = test::random_floats(m * d, 2), bias = test::random_floats(E, 3, 0.05f);
    std::vector<float> logits(m * E), routes(m * 4), rows(m * d), hidden(m * width), out(m * d), acc(m * d);
    const MoeScratch s{logits.data(), E,     routes.data(), 4, rows.data(), d,
                       hidden.data(), width, out.data(),    d, acc.data(),  d};
    std::vector<float> y(m * d), y_poisoned(m * d);
    const ComputeContext ctx{2, best_isa()};
    moe(ctx, p, {router, bias.data(), up, down}, {x.data(), d, m, y.data(), d}, s);
    std::set<int64_t> chosen;
    for (int64_t r = 0; r < m; ++r)
      for (int64_t j = 0; j < 2; ++j) chosen.insert(static_cast<int64_t>(routes[r * 4 + j]));
    ASSERT_LT(chosen.size(), static_cast<size_t>(E));
    for (int64_t e = 0; e < E; ++e) {
      const bool keep = chosen.count(e) > 0;
      poisoned_up.push_back(keep ? up[e] : pack(width, d, std::vector<float>(width * d, NAN)));
      poisoned_down.push_back(keep ? down[e] : pack(d, width, std::vector<float>(d * width, NAN)));
    }
    moe(ctx, p, {router, bias.data(), poisoned_up, poisoned_down}, {x.data(), d, m, y_poisoned.data(), d}, s);
    for (float v : y_poisoned) ASSERT_TRUE(std::isfinite(v));
    EXPECT_TRUE(test::same_bits(y, y_poisoned)) << "m=" << m;
  }
}

// The experts run in groups whose rows fit the scratch's capacity, their products split by output
// panels over the threads: neither the grouping, the thread count nor the instruction set may
// change a bit. d and the expert width are not multiples of the two-panel items (the last item of
// each product is partial); float, bf16 and quantized experts.
TEST(MoeExperts, TheGroupingOfExpertsAndTheThreadsChangeNoBit) {
  const int64_t d = 224, E = 16, k = 3, width = 96, m = 37;
  const MoeParams p{d, E, k, width, Activation::SwiGlu, MoeScoring::SoftmaxTopK, false, 1.0f};
  for (DType dtype : {DType::F32, DType::BF16, DType::Q8_0}) {
    std::vector<std::vector<uint8_t>> packed;
    packed.reserve(2 * E + 1);
    auto pack = [&](int64_t rows, int64_t cols, DType type, uint64_t seed) {
      const std::vector<float> values = test::random_floats(rows * cols, seed);
      packed.push_back(pack_weights(values.data(), DType::F32, rows, cols, type));
      return WeightMatrix{packed.back().data(), type, rows, cols};
    };
    const WeightMatrix router = pack(E, d, DType::F32, 1);
    std::vector<WeightMatrix> up, down;
    for (int64_t e = 0; e < E; ++e) {
      up.push_back(pack(p.up_rows(), d, dtype, 10 + e));
      down.push_back(pack(d, width, dtype, 40 + e));
    }
    const std::vector<float> x = test::random_floats(m * d, 2);
    std::vector<float> expected;
    for (int64_t capacity : {int64_t{0}, m + 5, m * k}) {
      for (int threads : {1, 2}) {
        for (Isa isa : test::supported_isas()) {
          const int64_t rows_held = capacity > 0 ? capacity : m;
          std::vector<float> logits(m * E), routes(m * 2 * k), rows(rows_held * d),
              hidden(rows_held * 2 * width), out(rows_held * d), acc(m * d), y(m * d);
          MoeScratch s{logits.data(), E,         routes.data(), 2 * k, rows.data(), d,
                       hidden.data(), 2 * width, out.data(),    d,     acc.data(),  d};
          s.capacity = capacity;
          moe(ComputeContext{threads, isa}, p, {router, nullptr, up, down}, {x.data(), d, m, y.data(), d}, s);
          if (expected.empty()) {
            for (float v : y) ASSERT_TRUE(std::isfinite(v));
            expected = y;
          }
          EXPECT_TRUE(test::same_bits(y, expected)) << dtype_name(dtype) << " capacity " << capacity << ", "
                                                    << threads << " threads, " << isa_name(isa);
        }
      }
    }
  }
}

}  // namespace
}  // namespace mb

// SPDX-License-Identifier: MIT
// The Gated DeltaNet kernel (ops/gated_delta_net.h) against its double reference over awkward
// shapes, and its exactness contract: T positions in one call equal T calls of one position, one
// thread equals two, a sequence in a batch equals it alone, every instruction set gives the same
// bits (memcmp). The op registry (common/op_cases_gdn.cc) runs it through every backend.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "common/test_util.h"
#include "core/error.h"
#include "ops/gated_delta_net.h"

namespace mb {
namespace {

struct GdnTestShape {
  int64_t nk, nv, dk, dv;
  bool tiled = false;
  float a_log_scale = 2.0f;  // A_log uniform in [-scale, scale] + a_log_shift
  float a_log_shift = 0.0f;
  float a_scale = 3.0f;  // raw decay inputs uniform in [-a_scale, a_scale] + a_shift
  float a_shift = 0.0f;
  float state_scale = 0.5f;  // the initial state's entries, uniform in [-scale, scale]
};

std::string gdn_describe(const GdnTestShape& s, int64_t T) {
  return "nk=" + std::to_string(s.nk) + " nv=" + std::to_string(s.nv) + " dk=" + std::to_string(s.dk) +
         " dv=" + std::to_string(s.dv) + (s.tiled ? " tiled" : " grouped") + " T=" + std::to_string(T);
}

// One sequence's inputs, its initial state and room for its outputs, in dense rows.
struct GdnTestData {
  GdnTestData(const GdnTestShape& s, int64_t T, uint64_t seed) : shape(s), length(T) {
    p.n_key_heads = s.nk;
    p.n_value_heads = s.nv;
    p.key_dim = s.dk;
    p.value_dim = s.dv;
    p.tiled_heads = s.tiled;
    qkv = test::random_floats(static_cast<size_t>(T * p.conv_width()), seed);
    b = test::random_floats(static_cast<size_t>(T * s.nv), seed + 1, 3.0f);
    a = test::random_floats(static_cast<size_t>(T * s.nv), seed + 2, s.a_scale);
    for (float& x : a) x += s.a_shift;
    // The layer's weights are the same for every seed, so sequences of one batch share them.
    a_neg = test::random_floats(static_cast<size_t>(s.nv), 3, s.a_log_scale);
    for (float& x : a_neg) x = -std::exp(x + s.a_log_shift);
    dt_bias = test::random_floats(static_cast<size_t>(s.nv), 4);
    state = test::random_floats(static_cast<size_t>(p.state_floats()), seed + 5, s.state_scale);
    y.assign(static_cast<size_t>(T * s.nv * s.dv), 0.0f);
    p.a_neg = a_neg.data();
    p.dt_bias = dt_bias.data();
  }
  GdnTestData(const GdnTestData&) = delete;
  GdnTestData& operator=(const GdnTestData&) = delete;

  // Positions [t0, t0 + n) as one sequence, over the state held here.
  GatedDeltaNetSequence sequence(int64_t t0, int64_t n) {
    const int64_t nv = shape.nv;
    return {n,
            qkv.data() + t0 * p.conv_width(),
            p.conv_width(),
            b.data() + t0 * nv,
            nv,
            a.data() + t0 * nv,
            nv,
            state.data(),
            y.data() + t0 * nv * shape.dv,
            nv * shape.dv};
  }

  GdnTestShape shape;
  int64_t length;
  GatedDeltaNetParams p;
  std::vector<float> qkv, b, a, a_neg, dt_bias, state, y;
};

// The largest |got - want| over the largest |want|.
double gdn_relative_error(const std::vector<float>& got, const std::vector<float>& want) {
  double err = 0.0, scale = 0.0;
  for (size_t i = 0; i < got.size(); ++i) {
    err = std::max(err, std::fabs(double(got[i]) - want[i]));
    scale = std::max(scale, std::fabs(double(want[i])));
  }
  return scale > 0.0 ? err / scale : err;
}

// The tolerance against the double reference, relative to the largest value. Each step rounds a
// state entry a few times (the decay, the write's fma: 2^-24 each) and each read and output is a
// sum of dk rounded products; the delta rule's write (I - beta k k^T with |k| = 1, beta <= 1)
// and the decay (<= 1) do not amplify earlier errors, so after T steps the error is at most about
// (dk + 4 T) roundings of the largest magnitude. Four times that bound, and never below 1e-6.
double gdn_tolerance(int64_t dk, int64_t T) {
  return std::max(1e-6, 4.0 * static_cast<double>(dk + 4 * T) * std::ldexp(1.0, -24));
}

// Runs the kernel on one sequence of `T` positions and compares outputs and state with the
// reference.
void expect_gdn_matches_reference(const GdnTestShape& s, int64_t T, uint64_t seed, int threads = 1) {
  GdnTestData got(s, T, seed), want(s, T, seed);
  gated_delta_net(ComputeContext{threads, best_isa()}, got.p, std::vector{got.sequence(0, T)});
  gated_delta_net_reference(want.p, want.sequence(0, T));
  const double tol = gdn_tolerance(s.dk, T);
  const double y_err = gdn_relative_error(got.y, want.y),
               state_err = gdn_relative_error(got.state, want.state);
  EXPECT_LE(y_err, tol) << gdn_describe(s, T) << " outputs";
  EXPECT_LE(state_err, tol) << gdn_describe(s, T) << " state";
  std::printf("[ gdn ] %s: relative error %.2e (outputs), %.2e (state) of %.2e allowed\n",
              gdn_describe(s, T).c_str(), y_err, state_err, tol);
  for (float x : got.y) ASSERT_TRUE(std::isfinite(x)) << gdn_describe(s, T);
}

// memcmp of two float vectors; an empty sequence's outputs are empty vectors, whose data() may be
// null, which memcmp must not be given even for zero bytes.
bool gdn_same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() &&
         (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0);
}

TEST(GatedDeltaNet, MatchesTheDoubleReference) {
  expect_gdn_matches_reference({1, 1, 16, 16}, 1, 10);
  expect_gdn_matches_reference({2, 4, 16, 32}, 17, 11);
  expect_gdn_matches_reference({2, 4, 64, 64, true}, 33, 12);
}

TEST(GatedDeltaNet, MatchesTheDoubleReferenceOverAwkwardShapes) {
  // Head widths 16, 64 and 128 with dk != dv both ways, fewer key heads than value heads in both
  // mappings (2 and 3 value heads per key head) and as many, T from 1 to 300 (mostly not multiples
  // of 16), and widths with a partial last vector.
  const struct {
    GdnTestShape shape;
    int64_t T;
  } cases[] = {
      {{1, 1, 16, 16}, 2},           {{1, 2, 16, 64}, 17},        {{2, 4, 64, 16, true}, 31},
      {{2, 2, 64, 64}, 100},         {{1, 2, 128, 128}, 300},     {{2, 4, 128, 64, true}, 47},
      {{1, 1, 64, 128}, 255},        {{2, 6, 16, 16, true}, 300}, {{2, 6, 16, 16}, 64},
      {{1, 3, 128, 16, false}, 129}, {{1, 2, 20, 13}, 9},         {{2, 4, 33, 47, true}, 23},
      {{1, 2, 64, 47}, 19},  // an odd column count: the last column alone
  };
  uint64_t seed = 100;
  for (const auto& c : cases) expect_gdn_matches_reference(c.shape, c.T, seed += 10);
}

TEST(GatedDeltaNet, MatchesTheDoubleReferenceWithStrongAndVanishingDecays) {
  // Strong: A = exp(A_log) up to e^5 and a + dt_bias up to 10, so g reaches about -1500 and the
  // state is wiped every step (exp(g) flushes towards 0). Vanishing: A about e^-8 and softplus of
  // about -10, so g is about -1e-8 and exp(g) rounds to 1 in f32: the state only accumulates.
  GdnTestShape strong{2, 4, 64, 64};
  strong.a_log_shift = 3.0f;
  strong.a_shift = 6.0f;
  expect_gdn_matches_reference(strong, 50, 300);
  GdnTestShape vanishing{2, 4, 64, 32, true};
  vanishing.a_log_shift = -8.0f;
  vanishing.a_log_scale = 0.5f;
  vanishing.a_shift = -10.0f;
  vanishing.a_scale = 1.0f;
  expect_gdn_matches_reference(vanishing, 200, 310);
  // A large initial state with no decay to speak of.
  vanishing.state_scale = 30.0f;
  expect_gdn_matches_reference(vanishing, 40, 320);
}

// The exactness contract, bit for bit: a shape with a partial last vector, grouped heads, and one
// of Qwen3.5's head widths with tiled heads.
const GdnTestShape kGdnExactShapes[] = {
    {2, 4, 20, 13}, {1, 2, 16, 64}, {2, 4, 128, 128, true}, {1, 2, 64, 47}};

TEST(GatedDeltaNet, PositionsInOneCallEqualOneCallPerPositionBitForBit) {
  for (const GdnTestShape& s : kGdnExactShapes)
    for (int64_t piece : {1, 7}) {
      const int64_t T = 37;
      GdnTestData whole(s, T, 400), steps(s, T, 400);
      const ComputeContext ctx{1, best_isa()};
      gated_delta_net(ctx, whole.p, std::vector{whole.sequence(0, T)});
      for (int64_t t = 0; t < T; t += piece)
        gated_delta_net(ctx, steps.p, std::vector{steps.sequence(t, std::min(piece, T - t))});
      EXPECT_EQ(std::memcmp(whole.y.data(), steps.y.data(), whole.y.size() * sizeof(float)), 0)
          << gdn_describe(s, T) << " piece " << piece;
      EXPECT_EQ(std::memcmp(whole.state.data(), steps.state.data(), whole.state.size() * sizeof(float)), 0)
          << gdn_describe(s, T) << " piece " << piece;
    }
}

TEST(GatedDeltaNet, BatchOfMixedLengthsEqualsEachSequenceAloneOnOneAndTwoThreadsBitForBit) {
  const std::vector<int64_t> lengths = {5, 1, 33, 0, 17};
  for (const GdnTestShape& s : kGdnExactShapes) {
    std::vector<std::unique_ptr<GdnTestData>> alone, one, two;
    std::vector<GatedDeltaNetSequence> batch_one, batch_two;
    for (size_t i = 0; i < lengths.size(); ++i) {
      for (auto* list : {&alone, &one, &two})
        list->push_back(std::make_unique<GdnTestData>(s, lengths[i], 500 + i));
      batch_one.push_back(one.back()->sequence(0, lengths[i]));
      batch_two.push_back(two.back()->sequence(0, lengths[i]));
      gated_delta_net(ComputeContext{1, best_isa()}, alone.back()->p,
                      std::vector{alone.back()->sequence(0, lengths[i])});
    }
    gated_delta_net(ComputeContext{1, best_isa()}, one[0]->p, batch_one);
    gated_delta_net(ComputeContext{2, best_isa()}, two[0]->p, batch_two);
    for (size_t i = 0; i < lengths.size(); ++i)
      for (const auto* batched : {&one, &two}) {
        const GdnTestData& got = *(*batched)[i];
        EXPECT_TRUE(gdn_same_bits(got.y, alone[i]->y))
            << gdn_describe(s, lengths[i]) << (batched == &one ? " 1 thread" : " 2 threads");
        EXPECT_TRUE(gdn_same_bits(got.state, alone[i]->state))
            << gdn_describe(s, lengths[i]) << (batched == &one ? " 1 thread" : " 2 threads");
      }
  }
}

uint64_t gdn_fnv1a(const std::vector<float>& values, uint64_t hash) {
  const auto* bytes = reinterpret_cast<const unsigned char*>(values.data());
  for (size_t i = 0; i < values.size() * sizeof(float); ++i) {
    hash ^= bytes[i];
    hash *= 0x100000001b3ull;
  }
  return hash;
}

// The outputs and states of the exact shapes (every specialized width and the generic one) on
// one instruction set and thread count.
std::vector<float> gdn_run_all_shapes(const ComputeContext& ctx) {
  std::vector<float> all;
  uint64_t seed = 700;
  for (const GdnTestShape& s : kGdnExactShapes) {
    GdnTestData d(s, 9, seed += 10);
    gated_delta_net(ctx, d.p, std::vector{d.sequence(0, 9)});
    all.insert(all.end(), d.y.begin(), d.y.end());
    all.insert(all.end(), d.state.begin(), d.state.end());
  }
  return all;
}

TEST(GatedDeltaNet, EveryInstructionSetGivesTheScalarBitsOnEveryMachine) {
  const std::vector<float> scalar = gdn_run_all_shapes({1, Isa::Scalar});
  for (Isa isa : test::supported_isas())
    for (int threads : {1, 2}) {
      const std::vector<float> got = gdn_run_all_shapes({threads, isa});
      ASSERT_EQ(got.size(), scalar.size());
      EXPECT_EQ(std::memcmp(got.data(), scalar.data(), got.size() * sizeof(float)), 0)
          << isa_name(isa) << ", " << threads << " threads";
    }
  // The bits computed on x86-64, pinned like tests/model/fingerprint_test.cc's table, so NEON
  // (the AArch64 build's op tests under qemu) is held to them too.
  const uint64_t hash = gdn_fnv1a(scalar, 0xcbf29ce484222325ull);
  EXPECT_EQ(hash, 0x1f4fcb92c9ff392dull) << std::hex << "computed 0x" << hash;
}

TEST(GatedDeltaNet, RefusesMalformedArguments) {
  GdnTestData d({2, 3, 16, 16}, 2, 600);  // 3 value heads over 2 key heads
  EXPECT_THROW(gated_delta_net(ComputeContext{}, d.p, std::vector{d.sequence(0, 2)}), Error);
  GdnTestData e({1, 2, 16, 16}, 2, 610);
  GatedDeltaNetSequence narrow = e.sequence(0, 2);
  narrow.ldqkv = e.p.conv_width() - 1;
  EXPECT_THROW(gated_delta_net(ComputeContext{}, e.p, std::vector{narrow}), Error);
  // An empty sequence may have no buffers at all.
  const GatedDeltaNetSequence empty{0,       nullptr, e.p.conv_width(), nullptr, 2,
                                    nullptr, 2,       nullptr,          nullptr, 32};
  EXPECT_NO_THROW(gated_delta_net(ComputeContext{}, e.p, std::vector{empty, e.sequence(0, 2)}));
  e.p.a_neg = nullptr;
  EXPECT_THROW(gated_delta_net(ComputeContext{}, e.p, std::vector{e.sequence(0, 2)}), Error);
}

}  // namespace
}  // namespace mb

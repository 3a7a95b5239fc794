// The Mamba-2 ops against their plain double-precision references: the scan (ops/mamba2_scan.h)
// from random conv outputs and raw dt over a random nonzero carried state, in both orders, over
// awkward shapes (d_state 1/16/64/128, headdim 16/24/64, 1/2/8 groups, head counts that are not
// multiples of 8, partial chunks, T = 1); and the grouped gated RMSNorm (ops/gated_rms_norm.h).
// Results may not depend on the thread count or the instruction set (memcmp).
#include <gtest/gtest.h>

#include <cmath>

#include "common/test_util.h"
#include "ops/gated_rms_norm.h"
#include "ops/mamba2_scan.h"

namespace mb {
namespace {

struct OpCase {
  std::string name;
  int64_t heads, headdim, d_state, groups;
  bool d_per_channel = false;
  float dt_max = INFINITY;
};

// Owns the random parameters, conv outputs, raw dt and initial state of one case.
struct OpFixture {
  Mamba2ScanParams params;
  std::vector<float> dt_bias, a, a_base2, d_skip;
  std::vector<float> xbc, dt, state;
  int64_t length;

  OpFixture(const OpCase& c, int64_t T, uint64_t seed) : length(T) {
    Mamba2ScanParams& p = params;
    p.n_heads = c.heads;
    p.headdim = c.headdim;
    p.d_state = c.d_state;
    p.n_groups = c.groups;
    p.d_skip_per_channel = c.d_per_channel;
    p.dt_max = c.dt_max;
    const int64_t H = c.heads;
    dt_bias = test::random_floats(H, seed + 1, 1.0f);
    for (float& b : dt_bias) b -= 3.0f;  // dt around softplus(-3) = 0.05
    a.resize(H);
    a_base2.resize(H);
    const auto a_log = test::random_floats(H, seed + 2, 1.4f);
    for (int64_t h = 0; h < H; ++h) {
      const double A = -std::exp(1.4 + double(a_log[h]));  // A in about [-16, -1]
      a[h] = static_cast<float>(A);
      a_base2[h] = static_cast<float>(A * M_LOG2E);
    }
    d_skip = test::random_floats(c.d_per_channel ? p.d_inner() : H, seed + 3, 1.0f);
    p.dt_bias = dt_bias.data();
    p.a = a.data();
    p.a_base2 = a_base2.data();
    p.d_skip = d_skip.data();
    xbc = test::random_floats(T * p.conv_width(), seed + 4, 1.0f);
    dt = test::random_floats(T * H, seed + 5, 2.0f);
    // A carried state of the size decode steps leave.
    state = test::random_floats(H * c.d_state * c.headdim, seed + 6, 0.3f);
  }

  // Runs the op (or the reference) on copies; returns y [T, d_inner] and leaves the state in
  // `out_state`.
  std::vector<float> run(bool chunked, int64_t chunk, bool reference, std::vector<float>& out_state,
                         Isa isa = best_isa(), int threads = 2) const {
    std::vector<float> dt_rows = dt;
    out_state = state;
    std::vector<float> y(length * params.d_inner(), 0.0f);
    Mamba2ScanParams p = params;
    p.chunk = chunk;
    const Mamba2ScanSequence seq{length,           xbc.data(), p.conv_width(), dt_rows.data(), p.n_heads,
                                 out_state.data(), y.data(),   p.d_inner(),    chunked};
    if (reference)
      mamba2_scan_reference(p, seq);
    else
      mamba2_scan(ComputeContext{threads, isa}, p, std::span(&seq, 1));
    return y;
  }
};

double relative(const std::vector<float>& expected, const std::vector<float>& got) {
  double peak = 0, diff = 0;
  for (size_t i = 0; i < expected.size(); ++i) {
    peak = std::max(peak, std::fabs(double(expected[i])));
    diff = std::max(diff, std::fabs(double(expected[i]) - got[i]));
  }
  return diff / std::max(peak, 1e-30);
}

class Mamba2Op : public ::testing::TestWithParam<OpCase> {};

TEST_P(Mamba2Op, BothOrdersMatchTheDoubleReferenceFromACarriedState) {
  for (int64_t T : {1, 37, 100}) {
    const OpFixture f(GetParam(), T, 100 + T);
    std::vector<float> ref_state;
    const auto expected = f.run(false, 0, true, ref_state);
    for (bool chunked : {false, true}) {
      for (int64_t chunk : chunked ? std::vector<int64_t>{5, 16, 64} : std::vector<int64_t>{64}) {
        std::vector<float> state;
        const auto y = f.run(chunked, chunk, false, state);
        const std::string what =
            "T " + std::to_string(T) + (chunked ? " chunked " + std::to_string(chunk) : " sequential");
        EXPECT_LE(relative(expected, y), 1e-5) << what;
        EXPECT_LE(relative(ref_state, state), 1e-5) << what << " state";
      }
    }
  }
}

TEST_P(Mamba2Op, ChunkedOrderIsWithin1e5OfTheSequentialOrder) {
  const OpFixture f(GetParam(), 150, 3);
  std::vector<float> seq_state, chunk_state;
  const auto sequential = f.run(false, 64, false, seq_state);
  for (int64_t chunk : {7, 32, 256}) {
    const auto chunked = f.run(true, chunk, false, chunk_state);
    EXPECT_LE(relative(sequential, chunked), 1e-5) << "chunk " << chunk;
    EXPECT_LE(relative(seq_state, chunk_state), 1e-5) << "chunk " << chunk;
  }
}

TEST_P(Mamba2Op, ResultsDoNotDependOnThreadsOrInstructionSet) {
  const OpFixture f(GetParam(), 45, 7);
  for (bool chunked : {false, true}) {
    std::vector<float> base_state;
    const auto base = f.run(chunked, 16, false, base_state, best_isa(), 1);
    for (Isa isa : test::supported_isas()) {
      for (int threads : {1, 3}) {
        std::vector<float> state;
        EXPECT_TRUE(test::same_bits(f.run(chunked, 16, false, state, isa, threads), base)) << isa_name(isa);
        EXPECT_TRUE(test::same_bits(state, base_state)) << isa_name(isa);
      }
    }
  }
}

TEST_P(Mamba2Op, OnePositionAtATimeEqualsAllAtOnce) {
  const OpFixture f(GetParam(), 23, 5);
  std::vector<float> all_state;
  const auto all = f.run(false, 64, false, all_state);
  // The same positions through T calls of one position each, the state carried between them.
  std::vector<float> state = f.state, dt = f.dt, y(all.size());
  const Mamba2ScanParams& p = f.params;
  for (int64_t t = 0; t < f.length; ++t) {
    const Mamba2ScanSequence seq{1,
                                 f.xbc.data() + t * p.conv_width(),
                                 p.conv_width(),
                                 dt.data() + t * p.n_heads,
                                 p.n_heads,
                                 state.data(),
                                 y.data() + t * p.d_inner(),
                                 p.d_inner(),
                                 false};
    mamba2_scan(ComputeContext{1, best_isa()}, p, std::span(&seq, 1));
  }
  EXPECT_TRUE(test::same_bits(y, all));
  EXPECT_TRUE(test::same_bits(state, all_state));
}

INSTANTIATE_TEST_SUITE_P(Shapes, Mamba2Op,
                         ::testing::Values(OpCase{"n128_p64_one_group", 2, 64, 128, 1},
                                           OpCase{"n64_p16_eight_groups", 8, 16, 64, 8},
                                           OpCase{"n16_p24_six_heads_two_groups", 6, 24, 16, 2},
                                           OpCase{"n1_p16_three_heads", 3, 16, 1, 1},
                                           OpCase{"n20_p40_d_per_channel_dt_limit", 4, 40, 20, 2, true,
                                                  0.03f}),
                         [](const auto& info) { return info.param.name; });

TEST(Mamba2Op, DtIsClampedToTheTimeStepLimit) {
  OpCase c{"limit", 2, 16, 16, 1};
  c.dt_max = 0.02f;
  OpFixture f(c, 9, 11);
  f.params.dt_min = 0.01f;
  std::vector<float> dt = f.dt, state = f.state, y(9 * f.params.d_inner());
  const Mamba2ScanSequence seq{
      9,    f.xbc.data(), f.params.conv_width(), dt.data(), 2, state.data(), y.data(), f.params.d_inner(),
      false};
  mamba2_scan(ComputeContext{1, best_isa()}, f.params, std::span(&seq, 1));
  for (float v : dt) {
    EXPECT_GE(v, 0.01f);
    EXPECT_LE(v, 0.02f);
  }
}

// ---- gated RMSNorm ---------------------------------------------------------------------------

TEST(GatedRmsNorm, MatchesTheReferencePerGroupOnEveryTarget) {
  for (int64_t dim : {16, 96, 100, 256}) {
    for (int64_t groups : {1, 2, 4}) {
      if (dim % groups != 0) continue;
      const int64_t rows = 5;
      const auto y = test::random_floats(rows * dim, dim + groups, 2.0f);
      const auto z = test::random_floats(rows * (dim + 3), dim * groups, 3.0f);
      auto weight = test::random_floats(dim, 7, 0.5f);
      for (float& w : weight) w += 1.0f;
      for (bool with_weight : {true, false}) {
        GatedRmsNormArgs args{y.data(), dim,     z.data(),     dim + 3,
                              rows,     dim,     dim / groups, with_weight ? weight.data() : nullptr,
                              1e-5f,    nullptr, dim};
        std::vector<float> expected(rows * dim), base(rows * dim);
        args.out = expected.data();
        gated_rms_norm_reference(args);
        args.out = base.data();
        gated_rms_norm(ComputeContext{1, Isa::Scalar}, args);
        EXPECT_LE(relative(expected, base), 2e-6) << dim << " " << groups;
        for (Isa isa : test::supported_isas()) {
          std::vector<float> got(rows * dim);
          args.out = got.data();
          gated_rms_norm(ComputeContext{2, isa}, args);
          EXPECT_TRUE(test::same_bits(got, base)) << isa_name(isa);
        }
      }
    }
  }
}

TEST(GatedRmsNorm, EachGroupIsNormalizedOnItsOwn) {
  // Two groups of very different scale: a whole-row norm would leave the small group small.
  const int64_t dim = 32;
  std::vector<float> y(dim), z(dim, 30.0f), weight(dim, 1.0f), out(dim);
  for (int64_t k = 0; k < dim; ++k) y[k] = k < 16 ? 100.0f : 0.01f;
  GatedRmsNormArgs args{y.data(), dim, z.data(), dim, 1, dim, 16, weight.data(), 1e-5f, out.data(), dim};
  gated_rms_norm(ComputeContext{1, best_isa()}, args);
  for (int64_t k = 0; k < dim; ++k) EXPECT_NEAR(out[k], 1.0f, 1e-3) << k;
}

}  // namespace
}  // namespace mb

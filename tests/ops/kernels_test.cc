// Each CPU kernel against its double-precision reference over awkward shapes, and the bitwise
// properties the engine's exactness rests on: the same bits on every instruction set and for
// every thread count, and a row's result independent of the rows computed with it.
#include <gtest/gtest.h>

#include "common/test_util.h"
#include "core/dtype.h"
#include "io/safetensors.h"
#include "ops/activations.h"
#include "ops/causal_conv.h"
#include "ops/matmul.h"
#include "ops/rms_norm.h"
#include "ops/selective_scan.h"

namespace mb {
namespace {

using test::random_floats;
using test::same_bits;

struct MatmulCase {
  int64_t m, n, k;
  DType dtype;
  bool bias, accumulate;
  bool softplus = false;
};

std::vector<float> run_matmul(const MatmulCase& c, const std::vector<uint8_t>& w, const std::vector<float>& x,
                              const std::vector<float>& bias, const ComputeContext* ctx) {
  std::vector<float> y = random_floats(c.m * (c.n + 3), 99);
  MatmulArgs args;
  args.x = x.data();
  args.ldx = c.k + 1;
  args.m = c.m;
  const std::vector<uint8_t> packed = pack_weights(w.data(), c.dtype, c.n, c.k, c.dtype);
  args.w = {packed.data(), c.dtype, c.n, c.k};
  args.bias = c.bias ? bias.data() : nullptr;
  args.y = y.data();
  args.ldy = c.n + 3;
  args.accumulate = c.accumulate;
  args.softplus = c.softplus;
  if (ctx != nullptr)
    matmul(*ctx, args);
  else
    matmul_reference(args);
  return y;
}

TEST(Matmul, MatchesReferenceAndIsBitIdenticalAcrossIsasThreadsAndRowCounts) {
  const std::vector<MatmulCase> cases = {
      {1, 1, 1, DType::F32, false, false},          {1, 17, 15, DType::F32, true, false},
      {5, 33, 16, DType::BF16, true, true},         {7, 9, 33, DType::F16, false, true},
      {13, 70, 100, DType::F32, true, false},       {4, 8, 768, DType::BF16, false, false},
      {9, 130, 47, DType::F16, true, true},         {1, 200, 33, DType::F32, true, true},
      {20, 64, 5, DType::BF16, false, false},       {7, 129, 64, DType::F32, false, true},
      {11, 100, 48, DType::F32, true, false, true}, {8, 37, 48, DType::BF16, true, false, true}};
  for (const auto& c : cases) {
    SCOPED_TRACE("m=" + std::to_string(c.m) + " n=" + std::to_string(c.n) + " k=" + std::to_string(c.k) +
                 " " + std::string(dtype_name(c.dtype)) + (c.softplus ? " softplus" : ""));
    const auto w = encode_f32(random_floats(c.n * c.k, 1), c.dtype);
    const auto x = random_floats(c.m * (c.k + 1), 2);
    const auto bias = random_floats(c.n, 3);
    const auto expected = run_matmul(c, w, x, bias, nullptr);
    std::vector<float> first;
    for (Isa isa : test::supported_isas()) {
      for (int threads : {1, 2, 3}) {
        const ComputeContext ctx{threads, isa};
        const auto got = run_matmul(c, w, x, bias, &ctx);
        const double scale = test::max_abs(expected) + 1.0;
        EXPECT_LE(test::max_abs_diff(got, expected), 2e-6 * scale * std::sqrt(double(c.k)));
        if (first.empty()) first = got;
        EXPECT_TRUE(same_bits(first, got)) << isa_name(isa) << " threads " << threads;
      }
    }
    // Each row computed alone (M = 1) equals the same row inside the M-row product.
    for (int64_t row = 0; row < c.m; ++row) {
      MatmulCase single = c;
      single.m = 1;
      std::vector<float> x_row(x.begin() + row * (c.k + 1), x.begin() + (row + 1) * (c.k + 1));
      const ComputeContext ctx{1, best_isa()};
      std::vector<float> y_row = run_matmul(single, w, x_row, bias, &ctx);
      std::vector<float> batch_y(first.begin() + row * (c.n + 3), first.begin() + row * (c.n + 3) + c.n);
      if (!c.accumulate) {
        y_row.resize(c.n);
        EXPECT_TRUE(same_bits(y_row, batch_y)) << "row " << row;
      }
    }
  }
}

TEST(RmsNorm, MatchesReferenceAndIsIsaInvariant) {
  for (int64_t dim : {1, 15, 16, 17, 768, 1001}) {
    const auto x = random_floats(3 * dim, 5, 3.0f);
    const auto w = random_floats(dim, 6);
    std::vector<float> expected(3 * dim), first;
    RmsNormArgs args{x.data(), dim, 3, dim, w.data(), 1e-5f, expected.data(), dim};
    rms_norm_reference(args);
    for (Isa isa : test::supported_isas()) {
      std::vector<float> got(3 * dim);
      args.y = got.data();
      rms_norm(ComputeContext{2, isa}, args);
      EXPECT_LE(test::max_abs_diff(got, expected), 1e-5 * (test::max_abs(expected) + 1));
      if (first.empty()) first = got;
      EXPECT_TRUE(same_bits(first, got));
    }
  }
}

TEST(Activations, ScalarEntryPointsMatchLibm) {
  for (float x = -80.0f; x < 80.0f; x += 0.37f) {
    EXPECT_NEAR(exp_f32(x), std::exp(double(x)), 3e-7 * std::exp(double(x))) << x;
    const double softplus = x > 20 ? x : std::log1p(std::exp(double(x)));
    EXPECT_NEAR(softplus_f32(x), softplus, 4e-7 * softplus + 1e-38) << x;
    const double silu = x / (1.0 + std::exp(-double(x)));
    EXPECT_NEAR(silu_f32(x), silu, 4e-7 * std::fabs(silu) + 1e-37) << x;
  }
  EXPECT_TRUE(std::isnan(exp_f32(NAN)));
}

// Runs conv over `length` positions in pieces of `piece` positions, carrying the history.
std::vector<float> run_conv(const ComputeContext& ctx, int64_t channels, int kernel, int64_t length,
                            int64_t piece, bool bias, std::vector<float>& history) {
  const auto x = random_floats(length * channels, 7);
  const auto w = random_floats(kernel * channels, 8);
  const auto b = random_floats(channels, 9);
  std::vector<float> y(length * channels);
  for (int64_t t0 = 0; t0 < length; t0 += piece) {
    CausalConvArgs args{
        x.data() + t0 * channels,  channels,       std::min(piece, length - t0), channels, kernel, w.data(),
        bias ? b.data() : nullptr, history.data(), y.data() + t0 * channels,     channels};
    if (ctx.n_threads == 0)
      causal_conv_silu_reference(args);
    else
      causal_conv_silu(ctx, std::span(&args, 1));
  }
  return y;
}

TEST(CausalConv, MatchesReferenceAndPiecewiseEqualsWhole) {
  for (int64_t channels : {1, 16, 37}) {
    for (int kernel : {1, 2, 4, 7}) {
      for (int64_t length : {1, 3, 20}) {
        const bool bias = kernel != 2;
        auto ref_history = random_floats((kernel - 1) * channels, 10);
        const auto initial = ref_history;
        const auto expected =
            run_conv(ComputeContext{0, Isa::Scalar}, channels, kernel, length, length, bias, ref_history);
        std::vector<float> first, first_history;
        for (Isa isa : test::supported_isas()) {
          for (int64_t piece : {int64_t{1}, int64_t{2}, length}) {
            auto history = initial;
            const auto got = run_conv(ComputeContext{2, isa}, channels, kernel, length, piece, bias, history);
            EXPECT_LE(test::max_abs_diff(got, expected), 1e-5 * (test::max_abs(expected) + 1));
            EXPECT_TRUE(same_bits(history, ref_history));  // history holds copies of inputs: exact
            if (first.empty()) first = got;
            EXPECT_TRUE(same_bits(first, got)) << "C=" << channels << " K=" << kernel << " piece " << piece;
          }
        }
      }
    }
  }
}

std::vector<float> run_scan(const ComputeContext* ctx, int64_t channels, int64_t d_state, int64_t length,
                            int64_t piece, bool gate, std::vector<float>& state, float dt_scale = 0.5f) {
  const auto u = random_floats(length * channels, 11);
  auto dt = random_floats(length * channels, 12, dt_scale);
  for (float& v : dt) v = std::fabs(v) + 1e-3f;
  const auto bc = random_floats(length * 2 * d_state, 13);
  const auto z = random_floats(length * channels, 14, 2.0f);
  std::vector<float> a_base2(d_state * channels);
  for (int64_t n = 0; n < d_state; ++n)
    for (int64_t c = 0; c < channels; ++c) a_base2[n * channels + c] = -float(n + 1) * (1.0f + 0.01f * c);
  const auto d_skip = random_floats(channels, 15);
  std::vector<float> y(length * channels);
  for (int64_t t0 = 0; t0 < length; t0 += piece) {
    SelectiveScanArgs args;
    args.length = std::min(piece, length - t0);
    args.channels = channels;
    args.d_state = d_state;
    args.u = u.data() + t0 * channels;
    args.ldu = channels;
    args.dt = dt.data() + t0 * channels;
    args.lddt = channels;
    args.b = bc.data() + t0 * 2 * d_state;
    args.c = args.b + d_state;
    args.ldbc = 2 * d_state;
    args.z = gate ? z.data() + t0 * channels : nullptr;
    args.ldz = channels;
    args.a_base2 = a_base2.data();
    args.d_skip = d_skip.data();
    args.state = state.data();
    args.y = y.data() + t0 * channels;
    args.ldy = channels;
    if (ctx == nullptr)
      selective_scan_reference(args);
    else
      selective_scan(*ctx, std::span(&args, 1));
  }
  return y;
}

TEST(SelectiveScan, MatchesReferenceAndPiecewiseEqualsWholeOverStateSizes) {
  for (int64_t d_state : {1, 16, 64, 128}) {
    for (int64_t channels : {1, 17, 48}) {
      const int64_t length = 9;
      auto ref_state = random_floats(d_state * channels, 16);
      const auto initial = ref_state;
      const auto expected = run_scan(nullptr, channels, d_state, length, length, true, ref_state);
      std::vector<float> first, first_state;
      for (Isa isa : test::supported_isas()) {
        for (int64_t piece : {1, 4, 9}) {
          auto state = initial;
          const ComputeContext ctx{2, isa};
          const auto got = run_scan(&ctx, channels, d_state, length, piece, true, state);
          EXPECT_LE(test::max_abs_diff(got, expected), 2e-5 * (test::max_abs(expected) + 1));
          EXPECT_LE(test::max_abs_diff(state, ref_state), 2e-5 * (test::max_abs(ref_state) + 1));
          if (first.empty()) {
            first = got;
            first_state = state;
          }
          EXPECT_TRUE(same_bits(first, got)) << "N=" << d_state << " C=" << channels << " piece " << piece;
          EXPECT_TRUE(same_bits(first_state, state));
        }
      }
    }
  }
}

// Steps up to dt = 40 drive dt * A from about 0 down to -900 (in base 2), through the range
// where exp underflows to subnormals; the kernel flushes decays below 2^-64 to 0, which stays
// within the reference's tolerance and gives the same bits on every target.
TEST(SelectiveScan, StronglyDecayingChannelsMatchTheReference) {
  const int64_t d_state = 16, channels = 40, length = 12;
  auto ref_state = random_floats(d_state * channels, 17);
  const auto initial = ref_state;
  const auto expected = run_scan(nullptr, channels, d_state, length, length, true, ref_state, 40.0f);
  std::vector<float> first;
  for (Isa isa : test::supported_isas()) {
    auto state = initial;
    const ComputeContext ctx{1, isa};
    const auto got = run_scan(&ctx, channels, d_state, length, length, true, state, 40.0f);
    EXPECT_LE(test::max_abs_diff(got, expected), 2e-5 * (test::max_abs(expected) + 1));
    EXPECT_LE(test::max_abs_diff(state, ref_state), 2e-5 * (test::max_abs(ref_state) + 1));
    if (first.empty()) first = got;
    EXPECT_TRUE(same_bits(first, got)) << isa_name(isa);
  }
}

}  // namespace
}  // namespace mb

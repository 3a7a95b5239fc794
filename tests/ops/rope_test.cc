// SPDX-License-Identifier: MIT
// The rotary embedding's factors and rotation against the exact rotation (double precision), and
// how far transformers' f32 computation of the angle (inv_freq and position * inv_freq in f32,
// then cos/sin of the f32 angle) lands from it: the reason ours are computed in double and
// rounded once (ops/rope.h). Every instruction set and thread count is compared with the scalar
// kernels, bit for bit, by the op registry (backend_ops_test.cc).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <vector>

#include "common/test_util.h"
#include "ops/rope.h"

namespace mb {
namespace {

// transformers' LlamaRotaryEmbedding (default rope type) in f32: inv_freq = 1 / theta^(2i/d) and
// freqs = inv_freq * position in f32, cos and sin of the f32 angle (std::cos in float).
float hf_angle(double theta, int64_t head_dim, int64_t i, int64_t position) {
  const float exponent = static_cast<float>(2 * i) / static_cast<float>(head_dim);
  const float inv_freq = 1.0f / std::pow(static_cast<float>(theta), exponent);
  return inv_freq * static_cast<float>(position);
}

TEST(Rope, RotationIsWithinAFewRoundingsOfTheExactOneAtAnyPosition) {
  const std::vector<int64_t> positions = {0, 1, 7, 1000, 100000, 1 << 20, (1 << 24) + 3};
  for (double theta : {1e4, 1e7})
    for (int64_t hd : {8, 80, 128})
      for (size_t at = 0; at < positions.size(); ++at) {
        // Three query heads and one key head at one position.
        const RopeParams p{hd, theta, 3, 1};
        const std::vector<float> q_in = test::random_floats(static_cast<size_t>(3 * hd), 50 + at, 2.0f),
                                 k_in = test::random_floats(static_cast<size_t>(hd), 60 + at, 2.0f);
        std::vector<float> q = q_in, k = k_in, q_ref = q_in, k_ref = k_in;
        rope(ComputeContext{1, best_isa()}, p,
             std::vector<RopeSequence>{{q.data(), 3 * hd, k.data(), hd, 1, positions[at]}});
        rope_reference(p, {q_ref.data(), 3 * hd, k_ref.data(), hd, 1, positions[at]});
        // Each output is two rounded factors, two rounded products and a rounded sum, and the
        // reference is rounded once: within 4 units of 2^-24 of |a| + |b| (5 allowed).
        const auto check = [&](const std::vector<float>& in, const std::vector<float>& got,
                               const std::vector<float>& ref, int64_t heads) {
          for (int64_t h = 0; h < heads; ++h)
            for (int64_t i = 0; i < hd / 2; ++i) {
              const double scale = std::fabs(in[h * hd + i]) + std::fabs(in[h * hd + hd / 2 + i]);
              for (int64_t j : {h * hd + i, h * hd + hd / 2 + i})
                EXPECT_LE(std::fabs(double(got[j]) - ref[j]), 5.0 * std::ldexp(scale, -24))
                    << "theta " << theta << " head_dim " << hd << " position " << positions[at] << " float "
                    << j;
            }
        };
        check(q_in, q, q_ref, 3);
        check(k_in, k, k_ref, 1);
      }
}

TEST(Rope, FactorsAreTheDoubleValuesRoundedOnceWhereTransformersF32AngleDrifts) {
  // Our factors are the exact cos and sin to f32's rounding at every position; transformers' f32
  // angle is off by up to position x 2^-24 radians, which grows with the position.
  const double theta = 1e7;
  const int64_t hd = 128;
  std::vector<float> c(hd / 2), s(hd / 2);
  for (int64_t position : {0, 4096, 100000, 1 << 20}) {
    rope_factors({hd, theta, 1, 1}, position, c.data(), s.data());
    double ours = 0.0, hf = 0.0;
    for (int64_t i = 0; i < hd / 2; ++i) {
      const long double angle =
          static_cast<long double>(position) / std::pow(static_cast<long double>(theta), 2.0L * i / hd);
      const double exact_c = static_cast<double>(std::cos(angle)),
                   exact_s = static_cast<double>(std::sin(angle));
      ours = std::max({ours, std::fabs(c[i] - exact_c), std::fabs(s[i] - exact_s)});
      const float a = hf_angle(theta, hd, i, position);
      hf = std::max({hf, std::fabs(std::cos(a) - exact_c), std::fabs(std::sin(a) - exact_s)});
    }
    EXPECT_LE(ours, std::ldexp(1.0, -24)) << position;  // half an f32 unit of 1, and a little more
    std::printf("[ rope ] position %lld: max |factor - exact| ours %.3g, transformers' f32 angle %.3g\n",
                static_cast<long long>(position), ours, hf);
    if (position >= 100000) {
      EXPECT_GT(hf, 100.0 * ours) << position;
    }
  }
}

TEST(Rope, PartialRotaryPairsChannelsWithinTheRotatedPrefixAndPassesTheRestThrough) {
  // transformers' partial_rotary_factor 0.5 (Bamba): head_dim 8, rot 4. A unit vector in channel
  // 0 at position 1 becomes cos(1) in channel 0 and sin(1) in channel 2 (pairs (i, i + rot/2)),
  // never channel 4 (llama.cpp's (i, i + head_dim/2) for a permuted granitehybrid file); channel
  // 1's pair (1, 3) turns at theta^(-2/4); channels 4..7 keep their bits.
  const int64_t hd = 8;
  const RopeParams p{hd, 10000.0, 1, 1, 4};
  std::vector<float> q = {1.0f, 0.0f, 0.0f, 0.0f, 0.5f, -0.25f, 3.0f, 7.0f};
  std::vector<float> k = {0.0f, 1.0f, 0.0f, 0.0f, -1.5f, 2.5f, 0.125f, 9.0f};
  const std::vector<float> q_in = q, k_in = k;
  rope(ComputeContext{1, best_isa()}, p, std::vector<RopeSequence>{{q.data(), hd, k.data(), hd, 1, 1}});
  EXPECT_EQ(q[0], static_cast<float>(std::cos(1.0)));
  EXPECT_EQ(q[2], static_cast<float>(std::sin(1.0)));
  EXPECT_EQ(q[1], 0.0f);
  EXPECT_EQ(q[3], 0.0f);
  const double angle = 1.0 / std::pow(10000.0, 0.5);
  EXPECT_EQ(k[1], static_cast<float>(std::cos(angle)));
  EXPECT_EQ(k[3], static_cast<float>(std::sin(angle)));
  EXPECT_EQ(std::memcmp(q.data() + 4, q_in.data() + 4, 4 * sizeof(float)), 0);
  EXPECT_EQ(std::memcmp(k.data() + 4, k_in.data() + 4, 4 * sizeof(float)), 0);

  // The reference does the same, and rot = head_dim given explicitly is the whole-head rotation.
  std::vector<float> q_ref = q_in, k_ref = k_in;
  rope_reference(p, {q_ref.data(), hd, k_ref.data(), hd, 1, 1});
  for (int64_t j = 0; j < hd; ++j) {
    EXPECT_NEAR(q[j], q_ref[j], 1e-6) << j;
    EXPECT_NEAR(k[j], k_ref[j], 1e-6) << j;
  }
  std::vector<float> whole = test::random_floats(static_cast<size_t>(3 * hd), 77, 2.0f), explicit_rot = whole;
  rope(ComputeContext{1, best_isa()}, {hd, 1e4, 3, 0},
       std::vector<RopeSequence>{{whole.data(), 3 * hd, nullptr, 0, 1, 9}});
  rope(ComputeContext{1, best_isa()}, {hd, 1e4, 3, 0, hd},
       std::vector<RopeSequence>{{explicit_rot.data(), 3 * hd, nullptr, 0, 1, 9}});
  EXPECT_EQ(std::memcmp(whole.data(), explicit_rot.data(), whole.size() * sizeof(float)), 0);
}

}  // namespace
}  // namespace mb

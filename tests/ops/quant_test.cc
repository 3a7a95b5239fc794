// SPDX-License-Identifier: MIT
// Block formats and reference (de)quantizers of ops/quant.h against blocks worked out by hand
// from GGML's layouts and quantizer algorithms.
#include "ops/quant.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

namespace mb {
namespace {

std::vector<uint8_t> quantize(DType type, const std::vector<float>& x) {
  std::vector<uint8_t> out(dtype_row_bytes(type, static_cast<int64_t>(x.size())));
  quantize_row(type, x.data(), static_cast<int64_t>(x.size()), out.data());
  return out;
}

std::vector<float> dequantize(DType type, const std::vector<uint8_t>& blocks, int64_t n) {
  std::vector<float> out(static_cast<size_t>(n));
  dequantize_row(type, blocks.data(), n, out.data());
  return out;
}

TEST(QuantDType, SizesNamesAndErrors) {
  EXPECT_FALSE(dtype_is_quantized(DType::BF16));
  EXPECT_TRUE(dtype_is_quantized(DType::Q6_K));
  EXPECT_EQ(dtype_block_weights(DType::F16), 1);
  EXPECT_EQ(dtype_block_weights(DType::Q4_0), 32);
  EXPECT_EQ(dtype_block_weights(DType::Q4_K), 256);
  EXPECT_EQ(dtype_block_bytes(DType::F32), 4u);
  EXPECT_EQ(dtype_block_bytes(DType::Q8_0), 34u);
  EXPECT_EQ(dtype_block_bytes(DType::Q4_0), 18u);
  EXPECT_EQ(dtype_block_bytes(DType::Q4_K), 144u);
  EXPECT_EQ(dtype_block_bytes(DType::Q6_K), 210u);
  EXPECT_EQ(dtype_row_bytes(DType::BF16, 3), 6u);
  EXPECT_EQ(dtype_row_bytes(DType::Q8_0, 64), 68u);
  EXPECT_EQ(dtype_row_bytes(DType::Q6_K, 512), 420u);
  EXPECT_THROW(dtype_row_bytes(DType::Q4_K, 288), Error);
  EXPECT_THROW(dtype_row_bytes(DType::Q4_0, 33), Error);
  EXPECT_THROW(dtype_size(DType::Q8_0), Error);
  for (DType t : {DType::F32, DType::BF16, DType::F16, DType::Q8_0, DType::Q4_0, DType::Q4_K, DType::Q6_K})
    EXPECT_EQ(parse_dtype(dtype_name(t)), t);
  EXPECT_EQ(parse_dtype("Q4_K"), DType::Q4_K);
  EXPECT_THROW(parse_dtype("q4_k_m"), Error);
  const uint8_t block[34] = {};
  float out[32];
  EXPECT_THROW(widen_row(block, DType::Q8_0, 32, out), Error);
  EXPECT_THROW(load_as_f32(block, DType::Q4_0, 0), Error);
  EXPECT_THROW(quantize_row(DType::Q8_0, out, 31, nullptr), Error);
}

TEST(QuantQ8_0, HandComputedBlock) {
  // amax = 127 makes d = 1 (f16 0x3c00), so each weight is its value rounded half away from 0.
  std::vector<float> x(32);
  for (int j = 0; j < 32; ++j) x[j] = static_cast<float>(j - 16);
  x[0] = 127.0f;
  x[1] = -2.5f;
  x[2] = 2.5f;
  x[3] = 0.49f;
  x[4] = -0.5f;
  x[5] = 1.5f;
  x[6] = -126.6f;
  const std::vector<uint8_t> got = quantize(DType::Q8_0, x);
  std::vector<uint8_t> want = {0x00,
                               0x3c,
                               127,
                               static_cast<uint8_t>(-3),
                               3,
                               0,
                               static_cast<uint8_t>(-1),
                               2,
                               static_cast<uint8_t>(-127)};
  for (int j = 7; j < 32; ++j) want.push_back(static_cast<uint8_t>(j - 16));
  EXPECT_EQ(got, want);
  const std::vector<float> back = dequantize(DType::Q8_0, got, 32);
  for (int j = 0; j < 32; ++j) EXPECT_EQ(back[j], static_cast<float>(static_cast<int8_t>(want[2 + j]))) << j;
}

TEST(QuantQ8_0, ZeroBlockAndScaleRounding) {
  const std::vector<uint8_t> zero = quantize(DType::Q8_0, std::vector<float>(32, 0.0f));
  EXPECT_EQ(zero, std::vector<uint8_t>(34, 0));
  // amax 1: d = 1/127 rounds to the f16 2^-7 * (1 + 8/1024) = 0x2008; the weights are
  // dequantized with that rounded d.
  std::vector<float> x(32, 0.0f);
  x[0] = 1.0f;
  x[1] = -1.0f;
  const std::vector<uint8_t> got = quantize(DType::Q8_0, x);
  EXPECT_EQ(got[0], 0x08);
  EXPECT_EQ(got[1], 0x20);
  EXPECT_EQ(static_cast<int8_t>(got[2]), 127);
  EXPECT_EQ(static_cast<int8_t>(got[3]), -127);
  EXPECT_EQ(dequantize(DType::Q8_0, got, 32)[0], 127.0f * (1.0f + 8.0f / 1024.0f) / 128.0f);
}

TEST(QuantQ4_0, HandComputedBlocks) {
  // The extreme -8 gives d = -8 / -8 = 1 and nibble = trunc(x + 8.5), clamped to 15.
  std::vector<float> x(32, 0.0f);
  x[0] = -8.0f;   // 0
  x[1] = 7.0f;    // 15
  x[2] = 7.9f;    // 16 -> 15
  x[3] = -0.6f;   // 7
  x[4] = 0.5f;    // 9
  x[5] = -3.2f;   // 5
  x[16] = 1.0f;   // 9 (high nibble of byte 0)
  x[17] = -7.5f;  // 1
  x[31] = 2.4f;   // 10
  std::vector<uint8_t> want = {0x00, 0x3c, 0x90, 0x1f, 0x8f, 0x87, 0x89, 0x85};
  for (int j = 6; j < 15; ++j) want.push_back(0x88);
  want.push_back(0xa8);
  EXPECT_EQ(quantize(DType::Q4_0, x), want);
  const std::vector<float> back = dequantize(DType::Q4_0, want, 32);
  EXPECT_EQ(back[0], -8.0f);
  EXPECT_EQ(back[2], 7.0f);
  EXPECT_EQ(back[17], -7.0f);
  EXPECT_EQ(back[31], 2.0f);

  // A positive extreme flips the sign of d: 4 -> d = -0.5 (0xb800), nibble 0 is +4 and the
  // far end (-4 -> 16.5 -> 15) can only reach -3.5.
  std::vector<float> y(32, 0.0f);
  y[0] = 4.0f;
  y[16] = -4.0f;
  const std::vector<uint8_t> got = quantize(DType::Q4_0, y);
  EXPECT_EQ(got[0], 0x00);
  EXPECT_EQ(got[1], 0xb8);
  EXPECT_EQ(got[2], 0xf0);
  const std::vector<float> yb = dequantize(DType::Q4_0, got, 32);
  EXPECT_EQ(yb[0], 4.0f);
  EXPECT_EQ(yb[16], -3.5f);
  EXPECT_EQ(yb[1], -0.0f);
}

// Sub-blocks holding the levels 0..15 twice (plus `offset`) are fitted exactly by scale 1 and
// min -offset, so every step of the Q4_K quantizer can be followed by hand.
std::vector<float> q4_k_ladder(float offset) {
  std::vector<float> x(256);
  for (int i = 0; i < 256; ++i) x[i] = static_cast<float>(i % 16) - offset;
  return x;
}

TEST(QuantQ4_K, HandComputedBlockWithoutMin) {
  // Every sub-block: scale 1, min 0. Sub-block scales quantize to 63, so d = f16(1/63) = 0x2410
  // (65/4096), dmin = 0; the 6-bit scale 63 sets both high bits of scales[0..3], scales[8..11]
  // hold its low nibble, the mins are 0. The weights requantize against d * 63 = 4095/4096.
  const std::vector<uint8_t> got = quantize(DType::Q4_K, q4_k_ladder(0.0f));
  std::vector<uint8_t> want = {0x10, 0x24, 0x00, 0x00, 0xff, 0xff, 0xff, 0xff,
                               0,    0,    0,    0,    0x0f, 0x0f, 0x0f, 0x0f};
  for (int g = 0; g < 4; ++g)
    for (int l = 0; l < 32; ++l) want.push_back(static_cast<uint8_t>((l % 16) * 17));
  EXPECT_EQ(got, want);
  const std::vector<float> back = dequantize(DType::Q4_K, got, 256);
  for (int i = 0; i < 256; ++i) ASSERT_EQ(back[i], static_cast<float>(i % 16) * 4095.0f / 4096.0f) << i;
}

TEST(QuantQ4_K, HandComputedBlockWithMin) {
  // Levels 0..15 minus 4: min 4 per sub-block, quantized to 63 with dmin = f16(4/63) = 0x2c10
  // (65/1024). Every scale and min is 63, so all twelve scale bytes are 0xff.
  const std::vector<uint8_t> got = quantize(DType::Q4_K, q4_k_ladder(4.0f));
  std::vector<uint8_t> want = {0x10, 0x24, 0x10, 0x2c};
  for (int j = 0; j < 12; ++j) want.push_back(0xff);
  for (int g = 0; g < 4; ++g)
    for (int l = 0; l < 32; ++l) want.push_back(static_cast<uint8_t>((l % 16) * 17));
  EXPECT_EQ(got, want);
  // (4095/4096) q - 4095/1024 is exact: (q - 4) * 4095/4096.
  const std::vector<float> back = dequantize(DType::Q4_K, got, 256);
  for (int i = 0; i < 256; ++i) ASSERT_EQ(back[i], static_cast<float>(i % 16 - 4) * 4095.0f / 4096.0f) << i;
}

TEST(QuantQ4_K, ZeroBlock) {
  EXPECT_EQ(quantize(DType::Q4_K, std::vector<float>(256, 0.0f)), std::vector<uint8_t>(144, 0));
}

TEST(QuantQ6_K, HandComputedBlock) {
  // Integers in -32..31 with -32 the extreme of every sub-block of 16: the first candidate scale
  // fits exactly (scale 1, levels = x) and no other candidate beats it. The sub-block scales
  // quantize to -128 against d = f16(1 / -128) = 0xa000, so the requantized levels are x again.
  std::vector<float> x(256);
  for (int i = 0; i < 256; ++i) x[i] = i % 16 == 0 ? -32.0f : static_cast<float>((i * 5) % 63 - 31);
  const std::vector<uint8_t> got = quantize(DType::Q6_K, x);
  ASSERT_EQ(got.size(), 210u);
  // Pack levels L = x + 32 by the layout in quant.h.
  std::vector<uint8_t> want(210, 0);
  for (int half = 0; half < 2; ++half) {
    for (int l = 0; l < 32; ++l) {
      int L[4];
      for (int r = 0; r < 4; ++r) L[r] = static_cast<int>(x[128 * half + l + 32 * r]) + 32;
      want[64 * half + l] = static_cast<uint8_t>((L[0] & 15) | (L[2] & 15) << 4);
      want[64 * half + l + 32] = static_cast<uint8_t>((L[1] & 15) | (L[3] & 15) << 4);
      want[128 + 32 * half + l] =
          static_cast<uint8_t>(L[0] >> 4 | (L[1] >> 4) << 2 | (L[2] >> 4) << 4 | (L[3] >> 4) << 6);
    }
  }
  for (int b = 0; b < 16; ++b) want[192 + b] = 0x80;
  want[208] = 0x00;
  want[209] = 0xa0;
  EXPECT_EQ(got, want);
  EXPECT_EQ(dequantize(DType::Q6_K, got, 256), x);
}

TEST(QuantQ6_K, ZeroBlock) {
  EXPECT_EQ(quantize(DType::Q6_K, std::vector<float>(256, 0.0f)), std::vector<uint8_t>(210, 0));
}

// Random rows: the round trip stays within each format's step, and unaligned storage gives the
// same floats.
TEST(QuantFormats, RoundTripErrorIsWithinTheStep) {
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(1024);
  for (float& v : x) v = normal(rng);
  struct Case {
    DType type;
    double max_relative;  // of the row's largest magnitude
  };
  for (const Case& c : {Case{DType::Q8_0, 1.0 / 127}, Case{DType::Q4_0, 1.0 / 8}, Case{DType::Q4_K, 1.0 / 8},
                        Case{DType::Q6_K, 1.0 / 16}, Case{DType::F16, 1e-3}, Case{DType::BF16, 1e-2}}) {
    const std::vector<uint8_t> q = quantize(c.type, x);
    std::vector<uint8_t> shifted(q.size() + 1);
    std::memcpy(shifted.data() + 1, q.data(), q.size());
    std::vector<float> back(x.size()), back_unaligned(x.size());
    dequantize_row(c.type, q.data(), 1024, back.data());
    dequantize_row(c.type, shifted.data() + 1, 1024, back_unaligned.data());
    EXPECT_EQ(0, std::memcmp(back.data(), back_unaligned.data(), back.size() * 4)) << dtype_name(c.type);
    double amax = 0, worst = 0, sum_sq = 0;
    for (size_t i = 0; i < x.size(); ++i) {
      amax = std::max(amax, std::fabs(double(x[i])));
      worst = std::max(worst, std::fabs(double(x[i]) - back[i]));
      sum_sq += (double(x[i]) - back[i]) * (double(x[i]) - back[i]);
    }
    EXPECT_LE(worst, c.max_relative * amax) << dtype_name(c.type);
    EXPECT_GT(sum_sq, 0.0) << dtype_name(c.type);
  }
}

}  // namespace
}  // namespace mb

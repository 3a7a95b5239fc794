// SPDX-License-Identifier: MIT
// The vectorized weight quantizers (quantize_row, quantize_rows: src/ops/cpu/quantize_kernels.inc)
// against the reference code (quantize_row_reference) byte for byte, on every instruction set this
// CPU has and several thread counts: random blocks over the whole float range and blocks made to
// hit the searches' corners (zeros, ties, outliers, subnormals, overflowing ranges, NaN and
// infinities, which the kernels leave to the reference).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/error.h"
#include "core/threading.h"
#include "ops/quant.h"

namespace mb {
namespace {

constexpr DType kTypes[] = {DType::Q8_0, DType::Q4_0, DType::Q4_K, DType::Q6_K};
constexpr int64_t kBlock = 256;  // every input below is built in blocks of 256 (8 Q8_0/Q4_0 blocks)

std::vector<Isa> isas() {
  std::vector<Isa> supported;
  for (Isa isa : {Isa::Scalar, Isa::Avx2, Isa::Avx512, Isa::Neon})
    if (isa_supported(isa)) supported.push_back(isa);
  return supported;
}

std::vector<uint8_t> reference(DType type, const std::vector<float>& x) {
  std::vector<uint8_t> out(dtype_row_bytes(type, static_cast<int64_t>(x.size())));
  quantize_row_reference(type, x.data(), static_cast<int64_t>(x.size()), out.data());
  return out;
}

// The index of the first block whose bytes differ, or -1.
int64_t first_difference(DType type, const std::vector<uint8_t>& a, const std::vector<uint8_t>& b) {
  if (a.size() != b.size()) return 0;
  const size_t block = dtype_block_bytes(type);
  for (size_t i = 0; i < a.size(); i += block)
    if (std::memcmp(a.data() + i, b.data() + i, block) != 0) return static_cast<int64_t>(i / block);
  return -1;
}

// quantize_row on every instruction set equals the reference, as one row and block by block.
void expect_reference_bytes(const std::vector<float>& x, const std::string& what) {
  for (DType type : kTypes) {
    const std::vector<uint8_t> want = reference(type, x);
    for (Isa isa : isas()) {
      std::vector<uint8_t> got(want.size(), 0xa5);
      quantize_row(type, x.data(), static_cast<int64_t>(x.size()), got.data(), isa);
      const int64_t bad = first_difference(type, got, want);
      EXPECT_EQ(bad, -1) << what << ": " << dtype_name(type) << " on " << isa_name(isa) << ", block " << bad;
    }
  }
}

std::vector<float> gaussian_blocks(std::mt19937& rng, int64_t blocks, float scale) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(blocks * kBlock));
  for (float& v : x) v = normal(rng) * scale;
  return x;
}

TEST(QuantizeKernels, RandomBlocksMatchTheReference) {
  std::mt19937 rng(2024);
  // Gaussian weights at scales over the whole float range (f16 scales underflow and overflow at
  // the ends), in runs of 1, 2, 3 and 5 blocks (odd runs leave lanes of the Q4_K pair empty).
  for (int exponent = -140; exponent <= 120; exponent += 20) {
    for (int64_t blocks : {1, 2, 3, 5}) {
      const std::vector<float> x = gaussian_blocks(rng, blocks, std::ldexp(1.0f, exponent));
      expect_reference_bytes(x, "gaussian 2^" + std::to_string(exponent) + " x " + std::to_string(blocks));
    }
  }
  // Other shapes of distribution: uniform and all of one sign (the Q4_K min clamps to 0),
  // heavy-tailed, sparse, and weights on a coarse grid (exact ties in the rounding).
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  std::cauchy_distribution<float> cauchy(0.0f, 0.01f);
  std::vector<float> x(16 * kBlock);
  for (int kind = 0; kind < 6; ++kind) {
    for (size_t i = 0; i < x.size(); ++i) {
      const float u = uniform(rng);
      switch (kind) {
        case 0:
          x[i] = u;
          break;
        case 1:
          x[i] = std::fabs(u) + 0.25f;
          break;
        case 2:
          x[i] = -std::fabs(u) * 3.0f;
          break;
        case 3:
          x[i] = cauchy(rng);
          break;
        case 4:
          x[i] = std::fabs(u) < 0.9f ? 0.0f : u;
          break;
        default:
          x[i] = std::round(u * 16.0f) / 8.0f;
          break;
      }
    }
    expect_reference_bytes(x, "distribution " + std::to_string(kind));
  }
}

// One block of 256 weights from a rule of the index.
template <typename Fn>
std::vector<float> block_of(Fn value) {
  std::vector<float> x(kBlock);
  for (int64_t i = 0; i < kBlock; ++i) x[i] = value(static_cast<int>(i));
  return x;
}

TEST(QuantizeKernels, AdversarialBlocksMatchTheReference) {
  const float big = std::numeric_limits<float>::max(), tiny = std::numeric_limits<float>::denorm_min();
  const float smallest_normal = std::numeric_limits<float>::min();
  std::vector<std::pair<std::string, std::vector<float>>> cases = {
      {"zeros", block_of([](int) { return 0.0f; })},
      {"negative zeros", block_of([](int) { return -0.0f; })},
      {"signed zeros", block_of([](int i) { return i % 3 ? 0.0f : -0.0f; })},
      {"all equal", block_of([](int) { return 0.3f; })},
      {"all equal negative", block_of([](int) { return -7.25f; })},
      {"one huge outlier",
       block_of([](int i) { return i == 77 ? 1e30f : 0.01f * static_cast<float>(i % 9); })},
      {"negative outlier first",
       block_of([](int i) { return i == 0 ? -5e3f : std::sin(static_cast<float>(i)); })},
      {"outlier last", block_of([](int i) { return i == 255 ? 400.0f : std::cos(static_cast<float>(i)); })},
      {"equal magnitudes of both signs", block_of([](int i) { return i % 2 ? 3.0f : -3.0f; })},
      {"alternating signs",
       block_of([](int i) { return (i % 2 ? 1.0f : -1.0f) * static_cast<float>(i % 13); })},
      {"subnormals", block_of([=](int i) { return tiny * static_cast<float>(i % 17) * (i % 2 ? 1 : -1); })},
      {"smallest subnormal", block_of([=](int i) { return i % 5 ? 0.0f : tiny; })},
      {"smallest normals", block_of([=](int i) { return smallest_normal * static_cast<float>(1 + i % 7); })},
      {"around the smallest normal",
       block_of([=](int i) { return smallest_normal * static_cast<float>(i % 4) / 3.0f; })},
      {"largest floats", block_of([=](int i) { return i % 2 ? big : -big; })},
      {"largest float among small", block_of([=](int i) { return i == 40 ? big : 1.0f; })},
      {"largest positive floats",
       block_of([=](int i) { return big * (1.0f - static_cast<float>(i % 8) / 64.0f); })},
      {"ramp", block_of([](int i) { return static_cast<float>(i) - 128.0f; })},
      {"integer levels", block_of([](int i) { return static_cast<float>(i % 16); })},
      {"half-integer ties", block_of([](int i) { return static_cast<float>(i % 16) + 0.5f; })},
      {"ties of q8_0 rounding",
       block_of([](int i) { return i % 32 == 0 ? -127.0f : static_cast<float>(i % 32) - 16.5f; })},
      {"ties of q4_0 rounding",
       block_of([](int i) { return i % 32 == 5 ? -8.0f : static_cast<float>(i % 16) - 8.5f; })},
      {"two values", block_of([](int i) { return i % 7 ? 0.5f : -0.25f; })},
      // One loud sub-block: the others' 6-bit scales round to 0, so their search levels stay.
      {"one loud sub-block",
       block_of([](int i) { return i / 32 == 3 ? 1e3f * std::sin(float(i)) : 1e-3f * std::cos(float(i)); })},
      {"one loud sixteen",
       block_of([](int i) { return i / 16 == 9 ? 1e4f * std::sin(float(i)) : 1e-2f * std::cos(float(i)); })},
      {"sub-blocks of zeros", block_of([](int i) { return (i / 32) % 2 ? 0.0f : std::sin(float(i)); })},
  };
  for (const auto& [name, values] : cases) expect_reference_bytes(values, name);
}

// NaN and infinities: the reference defines those blocks, and the kernels hand them to it; the
// finite blocks around them (in the same Q4_K pair) must not be disturbed.
TEST(QuantizeKernels, NonFiniteBlocksKeepTheReferenceBytes) {
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  uint32_t payload_bits = 0x7fc01234u;
  float payload;
  std::memcpy(&payload, &payload_bits, sizeof payload);
  std::mt19937 rng(7);
  for (const float special : {inf, -inf, nan, -nan, payload}) {
    for (int position : {0, 31, 32, 200, 255}) {
      // Blocks: finite, special, finite, finite, special (one in each Q4_K pair position).
      std::vector<float> x = gaussian_blocks(rng, 5, 1.0f);
      x[kBlock + position] = special;
      x[4 * kBlock + (position * 7) % kBlock] = special;
      expect_reference_bytes(x, "special " + std::to_string(special) + " at " + std::to_string(position));
    }
  }
  expect_reference_bytes(std::vector<float>(kBlock, nan), "all NaN");
  expect_reference_bytes(std::vector<float>(kBlock, inf), "all infinite");
}

TEST(QuantizeKernels, RowsEqualTheReferenceForEveryThreadCount) {
  std::mt19937 rng(99);
  const int64_t rows = 19, cols = 768;  // 3 Q4_K blocks per row: pairs span rows
  const std::vector<float> x = gaussian_blocks(rng, rows * cols / kBlock, 0.05f);
  std::vector<uint16_t> halves(x.size());
  for (size_t i = 0; i < x.size(); ++i) halves[i] = f32_to_bf16(x[i]);
  std::vector<float> widened(x.size());
  widen_row(halves.data(), DType::BF16, static_cast<int64_t>(x.size()), widened.data());
  for (DType type : kTypes) {
    const std::vector<uint8_t> want = reference(type, x), want_bf16 = reference(type, widened);
    // A source already quantized (Q8_0) is dequantized first.
    std::vector<uint8_t> q8(dtype_row_bytes(DType::Q8_0, static_cast<int64_t>(x.size())));
    quantize_row_reference(DType::Q8_0, x.data(), static_cast<int64_t>(x.size()), q8.data());
    std::vector<float> from_q8(x.size());
    dequantize_row(DType::Q8_0, q8.data(), static_cast<int64_t>(x.size()), from_q8.data());
    const std::vector<uint8_t> want_q8 = reference(type, from_q8);
    for (Isa isa : isas()) {
      for (int threads : {1, 2, 3}) {
        const ComputeContext ctx{threads, isa};
        std::vector<uint8_t> got(want.size());
        quantize_rows(ctx, x.data(), DType::F32, rows, cols, type, got.data());
        EXPECT_EQ(first_difference(type, got, want), -1)
            << dtype_name(type) << " " << isa_name(isa) << " " << threads;
        quantize_rows(ctx, halves.data(), DType::BF16, rows, cols, type, got.data());
        EXPECT_EQ(first_difference(type, got, want_bf16), -1) << "bf16 source " << dtype_name(type);
        if (type != DType::Q8_0) {
          quantize_rows(ctx, q8.data(), DType::Q8_0, rows, cols, type, got.data());
          EXPECT_EQ(first_difference(type, got, want_q8), -1) << "q8_0 source " << dtype_name(type);
        }
      }
    }
  }
}

TEST(QuantizeKernels, RowsReadUnalignedFloats) {
  std::mt19937 rng(5);
  const std::vector<float> x = gaussian_blocks(rng, 2, 1.0f);
  std::vector<uint8_t> shifted(x.size() * 4 + 1);
  std::memcpy(shifted.data() + 1, x.data(), x.size() * 4);
  for (DType type : kTypes) {
    std::vector<uint8_t> got(dtype_row_bytes(type, static_cast<int64_t>(x.size())));
    quantize_rows(ComputeContext{2}, shifted.data() + 1, DType::F32, 2, kBlock, type, got.data());
    EXPECT_EQ(got, reference(type, x)) << dtype_name(type);
  }
}

TEST(QuantizeKernels, RowsRefuseBadArguments) {
  const std::vector<float> x(kBlock, 1.0f);
  std::vector<uint8_t> out(4 * kBlock);
  EXPECT_THROW(quantize_rows(ComputeContext{1}, x.data(), DType::F32, 1, kBlock, DType::BF16, out.data()),
               Error);
  EXPECT_THROW(quantize_rows(ComputeContext{1}, x.data(), DType::F32, 1, 100, DType::Q4_K, out.data()),
               Error);
  EXPECT_THROW(quantize_rows(ComputeContext{0}, x.data(), DType::F32, 1, kBlock, DType::Q4_K, out.data()),
               Error);
  EXPECT_THROW(quantize_row(DType::Q6_K, x.data(), 100, out.data()), Error);
}

}  // namespace
}  // namespace mb

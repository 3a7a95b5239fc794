// SPDX-License-Identifier: MIT
// The quantized matmul's packing, its activation quantizer on every instruction set, and its
// refusal of rows that are not whole blocks. Its products (accuracy against the double reference,
// the same bits on every instruction set and thread count, a row alone equal to its row of a
// batch) are cases of the op registry (backend_ops_test.cc).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "common/test_util.h"
#include "ops/cpu/vec16.h"
#include "ops/matmul.h"
#include "ops/quant.h"
#include "ops/quant_matmul.h"

namespace mb {
namespace {

using test::random_floats;
using test::same_bits;

constexpr DType kQuantTypes[] = {DType::Q8_0, DType::Q4_0, DType::Q4_K, DType::Q6_K};

// Row-major GGML blocks of a random [rows, cols] matrix.
std::vector<uint8_t> quantized_rows(DType type, int64_t rows, int64_t cols, uint64_t seed) {
  const std::vector<float> w = random_floats(rows * cols, seed);
  const size_t row_bytes = dtype_row_bytes(type, cols);
  std::vector<uint8_t> blocks(rows * row_bytes);
  for (int64_t n = 0; n < rows; ++n)
    quantize_row(type, w.data() + n * cols, cols, blocks.data() + n * row_bytes);
  return blocks;
}

TEST(QuantPack, PackedRowsDequantizeLikeTheOriginalBlocks) {
  for (DType type : kQuantTypes) {
    const int64_t rows = 37, cols = 512;
    const std::vector<uint8_t> blocks = quantized_rows(type, rows, cols, 11);
    const std::vector<uint8_t> packed = pack_quantized(blocks.data(), type, rows, cols);
    EXPECT_EQ(packed.size(), 3 * 16 * dtype_row_bytes(type, cols)) << dtype_name(type);
    const WeightMatrix w{packed.data(), type, rows, cols};
    for (int64_t n = 0; n < rows; ++n) {
      std::vector<float> want(cols), got(cols);
      dequantize_row(type, blocks.data() + n * dtype_row_bytes(type, cols), cols, want.data());
      dequantize_packed_row(w, n, got.data());
      ASSERT_TRUE(same_bits(want, got)) << dtype_name(type) << " row " << n;
    }
    // Packing float rows quantizes them with quantize_row first.
    const std::vector<float> f = random_floats(rows * cols, 11);
    EXPECT_EQ(pack_weights(f.data(), DType::F32, rows, cols, type), packed) << dtype_name(type);
  }
  EXPECT_THROW(pack_quantized(nullptr, DType::Q4_K, 1, 32), Error);
}

// Blocks of random bytes (every level and scale bit pattern; the f16 scales set to 1 so that each
// level shows in the dequantized floats) pack so that reading the tile back a level at a time
// (dequantize_packed_row) gives the original blocks' values, in every lane of full and partial
// panels.
TEST(QuantPack, EveryBitOfRandomBlocksLandsWhereTheLayoutSays) {
  for (DType type : kQuantTypes) {
    const int64_t rows = 21, cols = 512;
    const size_t row_bytes = dtype_row_bytes(type, cols), block_bytes = dtype_block_bytes(type);
    std::vector<uint8_t> blocks(rows * row_bytes);
    uint64_t state = 12345;
    for (uint8_t& byte : blocks) {
      state = state * 6364136223846793005ull + 1442695040888963407ull;
      byte = static_cast<uint8_t>(state >> 56);
    }
    const uint16_t one = 0x3C00;
    for (size_t b = 0; b < blocks.size(); b += block_bytes) {
      const size_t d = type == DType::Q6_K ? 208 : 0;  // Q6_K keeps d after its levels and scales
      std::memcpy(&blocks[b + d], &one, 2);
      if (type == DType::Q4_K) std::memcpy(&blocks[b + 2], &one, 2);  // dmin
    }
    const std::vector<uint8_t> packed = pack_quantized(blocks.data(), type, rows, cols);
    const WeightMatrix w{packed.data(), type, rows, cols};
    for (int64_t n = 0; n < rows; ++n) {
      std::vector<float> want(cols), got(cols);
      dequantize_row(type, blocks.data() + n * row_bytes, cols, want.data());
      dequantize_packed_row(w, n, got.data());
      ASSERT_TRUE(same_bits(want, got)) << dtype_name(type) << " row " << n;
    }
  }
}

// Float matrices pack into panels of 64 outputs (bf16 pairs of vectors interleaved) from every float
// dtype to every other: each element lands in its slot, converted once through f32 (exact when it
// widens, rounded to nearest even when it narrows), in full and partial panels.
TEST(PackWeights, EveryFloatElementLandsInItsSlotConvertedOnce) {
  const DType kFloats[] = {DType::F32, DType::BF16, DType::F16};
  for (DType from : kFloats)
    for (DType to : kFloats)
      for (const int64_t rows : {1, 63, 64, 65, 130}) {
        const int64_t cols = 19;
        const std::vector<float> values = random_floats(rows * cols, 7 + rows);
        std::vector<uint8_t> source(values.size() * dtype_size(from));
        for (size_t i = 0; i < values.size(); ++i) {
          if (from == DType::F32) {
            std::memcpy(&source[4 * i], &values[i], 4);
          } else {
            const uint16_t half = from == DType::BF16 ? f32_to_bf16(values[i]) : f32_to_f16(values[i]);
            std::memcpy(&source[2 * i], &half, 2);
          }
        }
        const std::vector<uint8_t> packed = pack_weights(source.data(), from, rows, cols, to);
        ASSERT_EQ(packed.size(), packed_bytes({nullptr, to, rows, cols}));
        const WeightMatrix w{packed.data(), to, rows, cols};
        for (int64_t n = 0; n < rows; ++n)
          for (int64_t k = 0; k < cols; ++k) {
            const float wide = load_as_f32(source.data(), from, static_cast<size_t>(n * cols + k));
            const float want = to == DType::F32    ? wide
                               : to == DType::BF16 ? bf16_to_f32(f32_to_bf16(wide))
                                                   : f16_to_f32(f32_to_f16(wide));
            ASSERT_TRUE(same_bits(std::vector<float>{want}, std::vector<float>{packed_weight(w, n, k)}))
                << dtype_name(from) << " -> " << dtype_name(to) << ", rows " << rows << ", [" << n << ", "
                << k << "]";
          }
      }
}

// packed_bytes is what a product with one input row streams, so it must be the packed size
// itself, padding rows of the last panel included, for float panels of 64 and quantized of 16.
TEST(QuantPack, PackedBytesIsTheSizeOfThePackedMatrix) {
  for (DType type : {DType::F32, DType::BF16, DType::F16, DType::Q8_0, DType::Q4_0, DType::Q4_K, DType::Q6_K})
    for (const int64_t rows : {1, 16, 17, 63, 64, 65, 200}) {
      const int64_t cols = 512;
      const std::vector<float> f = random_floats(rows * cols, 5);
      const std::vector<uint8_t> packed = pack_weights(f.data(), DType::F32, rows, cols, type);
      EXPECT_EQ(packed_bytes(WeightMatrix{packed.data(), type, rows, cols}), packed.size())
          << dtype_name(type) << " rows " << rows;
    }
  EXPECT_EQ(packed_bytes(WeightMatrix{}), 0u);
}

TEST(QuantPack, StorableDtypeFallsBackForShortRows) {
  EXPECT_EQ(storable_dtype(DType::Q4_K, 768), DType::Q4_K);
  EXPECT_EQ(storable_dtype(DType::Q4_K, 96), DType::Q8_0);
  EXPECT_EQ(storable_dtype(DType::Q4_0, 48), DType::BF16);
  EXPECT_EQ(storable_dtype(DType::Q8_0, 48), DType::BF16);
  EXPECT_EQ(storable_dtype(DType::F16, 7), DType::F16);
}

TEST(QuantActivations, BlocksScaleByTheirOwnMaximum) {
  std::vector<float> x(64, 0.0f);
  x[0] = 127.0f;  // scale 1
  x[1] = -63.5f;  // ties round to even
  x[2] = 0.505f;
  x[3] = 0.4995f;
  x[4] = 2.5f;
  x[40] = -5.0f;  // block 1 alone: scale 5/127
  std::vector<int8_t> q(64);
  std::vector<float> scales(2);
  std::vector<int32_t> sums(4);
  quantize_activations(x.data(), 64, 32, q.data(), scales.data(), sums.data());
  EXPECT_EQ(scales[0], 1.0f);
  EXPECT_EQ(scales[1], 5.0f / 127.0f);
  EXPECT_EQ(q[0], 127);
  EXPECT_EQ(q[1], -64);  // -63.5 rounds to even
  EXPECT_EQ(q[2], 1);
  EXPECT_EQ(q[3], 0);
  EXPECT_EQ(q[4], 2);
  EXPECT_EQ(q[40], -127);
  EXPECT_EQ(sums[0], 127 - 64 + 1 + 2);
  EXPECT_EQ(sums[2], -127);
}

// Every instruction set's vector quantizer gives quantize_activations' bytes, including for
// NaN, infinities, signed zeros, ties and values past the clamp.
TEST(QuantActivations, EveryInstructionSetMatchesTheReference) {
  // On an AVX-512 CPU without VNNI, AVX-512's quant entries are AVX2's, tested twice then.
  std::vector<const cpu::QuantKernels*> tables;
  for (Isa isa : {Isa::Scalar, Isa::Avx2, Isa::Avx512, Isa::Neon})
    if (isa_supported(isa)) tables.push_back(&cpu::kernels_for(isa).quant);
  const float inf = std::numeric_limits<float>::infinity();
  for (int64_t block : {32, 256}) {
    const int64_t k = 4 * block;
    std::vector<float> x = random_floats(k, 31, 3.0f);
    x[1] = std::nanf("");  // block 0: a NaN among ordinary values
    for (int64_t j = block; j < 2 * block; ++j) x[j] = j % 2 == 0 ? -0.0f : 0.0f;  // block 1: zeros
    x[2 * block + 3] = -inf;  // block 2: an infinity makes the scale infinite
    x[3 * block] = 127.0f;    // block 3: scale 1, so halves are ties
    x[3 * block + 1] = 2.5f;
    x[3 * block + 2] = -3.5f;
    x[3 * block + 3] = -127.0f;
    std::vector<int8_t> want_q(k);
    std::vector<float> want_scales(k / block);
    std::vector<int32_t> want_sums(k / 16);
    quantize_activations(x.data(), k, block, want_q.data(), want_scales.data(), want_sums.data());
    EXPECT_EQ(want_q[3 * block + 1], 2);
    EXPECT_EQ(want_q[3 * block + 2], -4);
    for (const cpu::QuantKernels* table : tables) {
      std::vector<int8_t> q(k, 99);
      std::vector<float> scales(k / block);
      std::vector<int32_t> sums(k / 16);
      table->quantize(x.data(), k, block, q.data(), scales.data(), sums.data());
      EXPECT_EQ(q, want_q) << "block " << block;
      EXPECT_EQ(0, std::memcmp(scales.data(), want_scales.data(), scales.size() * 4)) << "block " << block;
      EXPECT_EQ(sums, want_sums) << "block " << block;
    }
  }
}

TEST(QuantMatmul, RejectsRowsThatAreNotWholeBlocks) {
  std::vector<uint8_t> tile(16 * 144, 0);
  std::vector<float> x(288), y(16);
  MatmulArgs a{x.data(), 288, 1, {tile.data(), DType::Q4_K, 16, 288}, nullptr, y.data(), 16};
  EXPECT_THROW(matmul(ComputeContext{}, a), Error);
}

}  // namespace
}  // namespace mb

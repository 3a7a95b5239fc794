// SPDX-License-Identifier: MIT
// Vulkan op structure the op registry (backend_ops_test.cc) does not see through the Backend
// interface: which shader a row count takes, the fused RMSNorm prologue against the two
// dispatches it replaces (the same operations, so the same bits on any device), weights at an odd
// bf16 offset, refusals of malformed arguments before anything is recorded, and the element-wise
// shader, which no backend op uses yet.
#include <algorithm>
#include <cmath>

#include "backends/vulkan/vulkan_ops.h"
#include "common/test_util.h"
#include "core/error.h"
#include "io/safetensors.h"
#include "ops/activations.h"
#include "ops/matmul.h"
#include "vulkan/ops_fixture.h"

namespace mb {
namespace {

using test::kScalar;
using test::random_floats;
using test::VulkanOps;
using vulkan::Buffer;

class VulkanMatmul : public VulkanOps {};

TEST_F(VulkanMatmul, FusedNormEqualsTheTwoGpuDispatches) {
  // The fused product against rms_norm then matmul on the device: the same bits on any device,
  // exact fma or not, since both run the same operations.
  for (int64_t m : {3, 40}) {
    const int64_t n = 70, k = 48;
    const auto weights = encode_f32(random_floats(n * k, 41), DType::BF16);
    const std::vector<uint8_t> packed = pack_weights(weights.data(), DType::BF16, n, k, DType::BF16);
    Buffer x = Buffer::from_floats(ctx(), random_floats(m * k, 42, 5.0f)),
           norm = Buffer::from_floats(ctx(), random_floats(k, 43)), normed(ctx(), m * k * sizeof(float)),
           fused(ctx(), m * n * sizeof(float)), separate(ctx(), m * n * sizeof(float)),
           w(ctx(), packed.size());
    w.upload(packed.data(), packed.size());
    run([&](vulkan::CommandSequence& s) {
      vulkan::record_rms_norm(s, {&x, 0, k, m, k, &norm, 0, 1e-6f, &normed, 0, k});
      vulkan::record_matmul(s, {&normed, 0, k, m, &w, 0, DType::BF16, n, k, nullptr, 0, &separate, 0, n});
      vulkan::record_matmul(s, {&x, 0, k, m, &w, 0, DType::BF16, n, k, nullptr, 0, &fused, 0, n, false, false,
                                &norm, 0, 1e-6f});
    });
    EXPECT_TRUE(test::same_bits(fused.to_floats(), separate.to_floats())) << "m=" << m;
  }
}

TEST_F(VulkanMatmul, TakesTheTiledShaderFromNineRows) {
  // The dispatch labels name the shader; they are readable where the device writes timestamps.
  if (!ctx().info().timestamps) GTEST_SKIP() << "no timestamps on this device";
  const int64_t n = 64, k = 8;
  Buffer x(ctx(), 9 * k * sizeof(float)), w(ctx(), n * k * sizeof(float)), y(ctx(), 9 * n * sizeof(float));
  vulkan::CommandSequence sequence(ctx(), 3);
  sequence.begin();
  vulkan::record_matmul(sequence, {&x, 0, k, 8, &w, 0, DType::F32, n, k, nullptr, 0, &y, 0, n});
  vulkan::record_matmul(sequence, {&x, 0, k, 9, &w, 0, DType::F32, n, k, nullptr, 0, &y, 0, n});
  vulkan::record_matmul(
      sequence, {&x, 0, k, 9, &w, 0, DType::F32, n, k, nullptr, 0, &y, 0, n, false, false, &x, 0, 1e-5f});
  sequence.end();
  sequence.run();
  const auto times = sequence.last_timings();
  ASSERT_EQ(times.size(), 3u);
  EXPECT_EQ(times[0].label, "matmul 8x64x8");
  EXPECT_EQ(times[1].label, "matmul_tiled 9x64x8");
  EXPECT_EQ(times[2].label, "matmul_tiled rms_norm+9x64x8");
}

TEST_F(VulkanMatmul, RefusesANormWeightShorterThanTheRow) {
  Buffer x(ctx(), 4 * 10 * sizeof(float)), norm(ctx(), 9 * sizeof(float)), y(ctx(), 4 * 64 * sizeof(float)),
      w(ctx(), 64 * 10 * sizeof(float));
  vulkan::CommandSequence sequence(ctx(), 1);
  sequence.begin();
  EXPECT_THROW(vulkan::record_matmul(sequence, {&x, 0, 10, 4, &w, 0, DType::F32, 64, 10, nullptr, 0, &y, 0,
                                                64, false, false, &norm, 0, 1e-5f}),
               Error);
  EXPECT_EQ(sequence.dispatch_count(), 0u);
  sequence.end();
}

TEST_F(VulkanOps, MatmulReadsWeightsAtAnOddBf16Offset) {
  // The backend always binds a matrix's pieces from their start; the op also reads weights that
  // start inside a 32-bit word (and x, bias and y at element offsets).
  const int64_t m = 3, n = 70, k = 9, x_at = 5, y_at = 7, bias_at = 3;
  const auto weights = encode_f32(random_floats(n * k, 21), DType::BF16);
  const std::vector<uint8_t> packed = pack_weights(weights.data(), DType::BF16, n, k, DType::BF16);
  const auto x = random_floats(x_at + m * k, 22), bias = random_floats(bias_at + n, 23);
  std::vector<float> cpu(y_at + m * n, 0.0f);
  matmul(kScalar, {x.data() + x_at,
                   k,
                   m,
                   {packed.data(), DType::BF16, n, k},
                   bias.data() + bias_at,
                   cpu.data() + y_at,
                   n});
  // Weights start one bf16 element into their buffer (an odd offset inside a 32-bit word).
  std::vector<uint8_t> shifted(2 + packed.size());
  std::copy(packed.begin(), packed.end(), shifted.begin() + 2);
  Buffer x_buffer = Buffer::from_floats(ctx(), x), bias_buffer = Buffer::from_floats(ctx(), bias),
         y_buffer = Buffer::from_floats(ctx(), std::vector<float>(y_at + m * n, 0.0f)),
         w_buffer(ctx(), shifted.size());
  w_buffer.upload(shifted.data(), shifted.size());
  run([&](vulkan::CommandSequence& s) {
    vulkan::record_matmul(s, {&x_buffer, x_at, k, m, &w_buffer, 1, DType::BF16, n, k, &bias_buffer, bias_at,
                              &y_buffer, y_at, n});
  });
  const auto got = y_buffer.to_floats();
  EXPECT_LE(test::max_abs_diff(got, cpu), 1e-5 * (test::max_abs(cpu) + 1));
  if (ctx().exact_fma()) {
    EXPECT_TRUE(test::same_bits(got, cpu));
  }
}

TEST_F(VulkanOps, RmsNormSegmentsThatOverlapAreRefused) {
  // Overlapping segments would race in place: refused before anything is recorded.
  const int64_t rows = 3, ldx = 45;
  const auto x = random_floats(rows * ldx, 41, 3.0f), w = random_floats(40, 42);
  const vulkan::GpuRmsNormSegment overlapping[] = {{0, 5, 0}, {4, 5, 0}};
  Buffer x_buffer = Buffer::from_floats(ctx(), x), w_buffer = Buffer::from_floats(ctx(), w);
  vulkan::CommandSequence sequence(ctx(), 1);
  sequence.begin();
  EXPECT_THROW(vulkan::record_rms_norm_segments(
                   sequence, {&x_buffer, 0, ldx, rows, &w_buffer, 1e-5f, &x_buffer, 0, ldx, overlapping}),
               Error);
  EXPECT_EQ(sequence.dispatch_count(), 0u);
  sequence.end();
}

TEST_F(VulkanOps, ElementwiseAddAndGateEqualCpu) {
  const int64_t rows = 3, cols = 77, ld = 80;
  const auto a = random_floats(rows * ld, 31, 4.0f), b = random_floats(rows * ld, 32, 4.0f);
  Buffer a_buffer = Buffer::from_floats(ctx(), a), b_buffer = Buffer::from_floats(ctx(), b),
         y_buffer(ctx(), rows * cols * sizeof(float));
  for (auto op : {vulkan::ElementwiseOp::Add, vulkan::ElementwiseOp::SiluGate}) {
    std::vector<float> cpu(rows * cols), reference(rows * cols);
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < cols; ++c) {
        const float av = a[r * ld + c], bv = b[r * ld + c];
        cpu[r * cols + c] = op == vulkan::ElementwiseOp::Add ? av + bv : av * silu_f32(bv);
        reference[r * cols + c] = static_cast<float>(op == vulkan::ElementwiseOp::Add
                                                         ? double(av) + bv
                                                         : double(av) * (bv / (1.0 + std::exp(-double(bv)))));
      }
    run([&](vulkan::CommandSequence& s) {
      vulkan::record_elementwise(s, {op, rows, cols, &a_buffer, 0, ld, &b_buffer, 0, ld, &y_buffer, 0, cols});
    });
    expect_matches(y_buffer.to_floats(), cpu, reference, op == vulkan::ElementwiseOp::Add ? "add" : "gate");
  }
}

}  // namespace
}  // namespace mb
// Each GPU op against the CPU kernel (scalar instruction set, which every instruction set equals)
// with memcmp, and against the double-precision reference within NMSE 1e-7, over awkward shapes.
// The bitwise tier needs an exact fma on the device (Context::exact_fma); without it only the
// tolerance tier runs, and the test says so.
#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <memory>
#include <span>

#include "backends/vulkan/vulkan_ops.h"
#include "common/test_util.h"
#include "core/error.h"
#include "io/safetensors.h"
#include "ops/activations.h"
#include "ops/argmax.h"
#include "ops/matmul.h"
#include "ops/rms_norm.h"
#include "vulkan/ops_fixture.h"

namespace mb {
namespace {

using test::kMaxNmse;
using test::kScalar;
using test::random_floats;
using test::VulkanOps;
using vulkan::Buffer;

struct MatmulCase {
  int64_t m, n, k;
  DType dtype;
  bool bias, accumulate, softplus;
  bool norm = false;  // RMS-normalize x's rows inside the product (GpuMatmulArgs::norm_weight)
};

std::string describe(const MatmulCase& c) {
  return "m=" + std::to_string(c.m) + " n=" + std::to_string(c.n) + " k=" + std::to_string(c.k) + " " +
         std::string(dtype_name(c.dtype)) + (c.bias ? " bias" : "") + (c.accumulate ? " accumulate" : "") +
         (c.softplus ? " softplus" : "") + (c.norm ? " norm" : "");
}

class VulkanMatmul : public VulkanOps {
 protected:
  // One product on the GPU against the scalar CPU kernel (bits) and the double reference; with
  // c.norm the CPU runs rms_norm and then matmul, as the model did before the fusion. Operands
  // sit at offsets inside their buffers with row strides wider than the rows.
  void check(const MatmulCase& c) {
    const std::string what = describe(c);
    const int64_t ldx = c.k + 2, ldy = c.n + 3, x_at = 3, norm_at = 1;
    const auto weights = encode_f32(random_floats(c.n * c.k, 1), c.dtype);
    const std::vector<uint8_t> packed = pack_weights(weights.data(), c.dtype, c.n, c.k, c.dtype);
    const auto x = random_floats(x_at + c.m * ldx, 2, 3.0f);
    const auto bias = random_floats(c.n, 3);
    const auto norm_weight = random_floats(norm_at + c.k, 5);
    const auto y0 = random_floats(c.m * ldy, 4);
    // The CPU's input rows: x itself, or its normalized copy [m, k].
    std::vector<float> normed(c.m * c.k), normed_reference(c.m * c.k);
    const float* cpu_x = x.data() + x_at;
    const float* reference_x = cpu_x;
    int64_t cpu_ldx = ldx;
    if (c.norm) {
      RmsNormArgs norm{x.data() + x_at, ldx,           c.m, c.k, norm_weight.data() + norm_at,
                       1e-5f,           normed.data(), c.k};
      rms_norm(kScalar, norm);
      norm.y = normed_reference.data();
      rms_norm_reference(norm);
      cpu_x = normed.data();
      reference_x = normed_reference.data();
      cpu_ldx = c.k;
    }
    MatmulArgs args{cpu_x,
                    cpu_ldx,
                    c.m,
                    {packed.data(), c.dtype, c.n, c.k},
                    c.bias ? bias.data() : nullptr,
                    nullptr,
                    ldy,
                    c.accumulate,
                    c.softplus};
    std::vector<float> cpu = y0, reference = y0;
    args.y = cpu.data();
    matmul(kScalar, args);
    args.x = reference_x;
    args.y = reference.data();
    matmul_reference(args);

    Buffer x_buffer = Buffer::from_floats(ctx(), x), bias_buffer = Buffer::from_floats(ctx(), bias),
           norm_buffer = Buffer::from_floats(ctx(), norm_weight), y_buffer = Buffer::from_floats(ctx(), y0),
           w_buffer(ctx(), packed.size());
    w_buffer.upload(packed.data(), packed.size());
    run([&](vulkan::CommandSequence& s) {
      vulkan::record_matmul(
          s, {&x_buffer, x_at, ldx, c.m, &w_buffer, 0, c.dtype, c.n, c.k, c.bias ? &bias_buffer : nullptr, 0,
              &y_buffer, 0, ldy, c.accumulate, c.softplus, c.norm ? &norm_buffer : nullptr, norm_at, 1e-5f});
    });
    expect_matches(y_buffer.to_floats(), cpu, reference, what);
  }
};

TEST_F(VulkanMatmul, EqualsCpuOverShapesAndDtypes) {
  std::vector<MatmulCase> cases;
  for (int64_t k : {1, 7, 64, 777})
    for (int64_t m : {1, 3, 17})
      cases.push_back({m, k == 777 ? 70 : 130, k, k == 7 ? DType::BF16 : (k == 64 ? DType::F16 : DType::F32),
                       m != 3, m == 17, m == 3});
  cases.push_back({5, 64, 33, DType::BF16, true, true, false});
  cases.push_back({2, 1, 9, DType::F16, true, false, true});
  cases.push_back({4, 100, 48, DType::F32, true, false, true});
  cases.push_back({3, 37, 16, DType::BF16, false, false, false});
  for (const MatmulCase& c : cases) check(c);
}

TEST_F(VulkanMatmul, TiledEqualsCpuOverAwkwardShapes) {
  // Rows on both sides of the decode/tiled switch (8 | 9) and of a 128-row tile; outputs short of,
  // between and past whole panels; depths short of, between and past a 16-deep slice. Every
  // dtype meets every row count, and the epilogues rotate.
  const DType dtypes[] = {DType::F32, DType::BF16, DType::F16};
  const int64_t ns[] = {1, 100, 200}, ks[] = {1, 3, 65, 200};
  int index = 0;
  for (int64_t m : {1, 7, 8, 9, 63, 65, 130}) {
    for (DType dtype : dtypes) {
      const int64_t n = ns[index % 3], k = ks[index % 4];
      const int flags = index % 4;  // none, bias, bias + softplus, accumulate
      check({m, n, k, dtype, flags >= 1 && flags <= 2, flags == 3, flags == 2});
      ++index;
    }
  }
  // A model-sized depth (130m's d_model) over a partial tile of rows.
  check({130, 100, 768, DType::BF16, true, false, false});
  check({33, 70, 768, DType::F32, false, true, false});
}

TEST_F(VulkanMatmul, FusedNormEqualsRmsNormThenMatmul) {
  // The norm's lane sums need k past 16 lanes (17, 65, 768) and short of them (1, 3); the decode
  // shader (m <= 8) and the tiled one (m >= 9) each fuse it.
  const DType dtypes[] = {DType::F32, DType::BF16, DType::F16};
  const int64_t ks[] = {1, 3, 17, 65, 768};
  int index = 0;
  for (int64_t m : {1, 5, 8, 9, 63, 130}) {
    for (DType dtype : dtypes) {
      const int64_t k = ks[index % 5], n = index % 2 ? 100 : 64;
      check({m, n, k, dtype, index % 3 != 0, index % 3 == 2, false, true});
      ++index;
    }
  }
}

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

TEST_F(VulkanOps, MatmulReadsViewsAtOffsets) {
  // The model's operands are slices of larger buffers: x, W, bias and y at element offsets.
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

TEST_F(VulkanOps, RmsNormEqualsCpu) {
  for (int64_t dim : {1, 7, 16, 17, 64, 777}) {
    for (int64_t rows : {1, 3}) {
      const std::string what = "dim=" + std::to_string(dim) + " rows=" + std::to_string(rows);
      const int64_t ldx = dim + 1;
      const auto x = random_floats(rows * ldx, 5, 3.0f), w = random_floats(dim, 6);
      std::vector<float> cpu(rows * dim), reference(rows * dim);
      RmsNormArgs args{x.data(), ldx, rows, dim, w.data(), 1e-5f, cpu.data(), dim};
      rms_norm(kScalar, args);
      args.y = reference.data();
      rms_norm_reference(args);
      Buffer x_buffer = Buffer::from_floats(ctx(), x), w_buffer = Buffer::from_floats(ctx(), w),
             y_buffer(ctx(), rows * dim * sizeof(float));
      run([&](vulkan::CommandSequence& s) {
        vulkan::record_rms_norm(s, {&x_buffer, 0, ldx, rows, dim, &w_buffer, 0, 1e-5f, &y_buffer, 0, dim});
      });
      expect_matches(y_buffer.to_floats(), cpu, reference, what);

      // In place, as FalconMamba normalizes parts of x_proj's output.
      std::vector<float> in_place = x;
      rms_norm(kScalar, {in_place.data(), ldx, rows, dim, w.data(), 1e-5f, in_place.data(), ldx});
      run([&](vulkan::CommandSequence& s) {
        vulkan::record_rms_norm(s, {&x_buffer, 0, ldx, rows, dim, &w_buffer, 0, 1e-5f, &x_buffer, 0, ldx});
      });
      if (ctx().exact_fma()) {
        EXPECT_TRUE(test::same_bits(x_buffer.to_floats(), in_place)) << what << " in place";
      }
    }
  }
}

TEST_F(VulkanOps, RmsNormOverSegmentsEqualsOneNormPerSegment) {
  // FalconMamba's dt_low, B and C: segments of awkward widths in rows with a stride, each with
  // its own weights, normalized in one dispatch, in place and into another buffer.
  const int64_t rows = 3, ldx = 45;
  const vulkan::GpuRmsNormSegment segments[] = {{0, 5, 0}, {5, 16, 7}, {21, 17, 0}, {40, 1, 30}};
  const auto x = random_floats(rows * ldx, 41, 3.0f), w = random_floats(40, 42);
  for (size_t count : {1, 3, 4}) {
    std::vector<float> in_place = x, out_of_place(rows * ldx, 0.0f);
    for (size_t i = 0; i < count; ++i) {
      const vulkan::GpuRmsNormSegment& g = segments[i];
      rms_norm(kScalar, {x.data() + g.column, ldx, rows, g.dim, w.data() + g.weight_offset, 1e-5f,
                         out_of_place.data() + g.column, ldx});
      rms_norm(kScalar, {in_place.data() + g.column, ldx, rows, g.dim, w.data() + g.weight_offset, 1e-5f,
                         in_place.data() + g.column, ldx});
    }
    Buffer x_buffer = Buffer::from_floats(ctx(), x), w_buffer = Buffer::from_floats(ctx(), w),
           y_buffer = Buffer::from_floats(ctx(), std::vector<float>(rows * ldx, 0.0f));
    const std::span<const vulkan::GpuRmsNormSegment> used(segments, count);
    run([&](vulkan::CommandSequence& s) {
      vulkan::record_rms_norm_segments(s,
                                       {&x_buffer, 0, ldx, rows, &w_buffer, 1e-5f, &y_buffer, 0, ldx, used});
      vulkan::record_rms_norm_segments(s,
                                       {&x_buffer, 0, ldx, rows, &w_buffer, 1e-5f, &x_buffer, 0, ldx, used});
    });
    const std::string what = std::to_string(count) + " segments";
    EXPECT_LE(test::nmse(x_buffer.to_floats(), in_place), kMaxNmse) << what;
    if (ctx().exact_fma()) {
      EXPECT_TRUE(test::same_bits(y_buffer.to_floats(), out_of_place)) << what;
      EXPECT_TRUE(test::same_bits(x_buffer.to_floats(), in_place)) << what << " in place";
    }
  }
  // Overlapping segments would race in place: refused before anything is recorded.
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

TEST_F(VulkanOps, ArgmaxEqualsTheGreedyIndex) {
  // Rows shorter and longer than a workgroup, ties (the lowest index wins), NaNs (skipped), a
  // row of NaNs (0), -0 against +0 (equal: the first), at an offset with a row stride.
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (int64_t cols : {1, 5, 64, 65, 1000}) {
    const int64_t rows = 6, ld = cols + 3, x_at = 2, y_at = 1;
    std::vector<float> x = random_floats(x_at + rows * ld, static_cast<uint64_t>(cols));
    for (float& v : x) v = std::round(v * 3.0f);  // many ties
    float* r = x.data() + x_at;
    r[1 * ld + cols / 2] = nan;
    for (int64_t c = 0; c < cols; ++c) r[2 * ld + c] = nan;
    for (int64_t c = 0; c < cols; ++c) r[3 * ld + c] = (c % 2) ? 0.0f : -0.0f;
    r[4 * ld + cols - 1] = 100.0f;
    r[5 * ld] = 100.0f;
    if (cols > 1) r[5 * ld + cols - 1] = 100.0f;
    Buffer x_buffer = Buffer::from_floats(ctx(), x),
           y_buffer = Buffer::from_floats(ctx(), std::vector<float>(y_at + rows, -1.0f));
    run([&](vulkan::CommandSequence& s) {
      vulkan::record_argmax(s, {&x_buffer, x_at, ld, rows, cols, &y_buffer, y_at});
    });
    const std::vector<float> got = y_buffer.to_floats();
    for (int64_t row = 0; row < rows; ++row)
      EXPECT_EQ(got[y_at + row], static_cast<float>(greedy_index(r + row * ld, cols)))
          << "cols " << cols << " row " << row;
    EXPECT_EQ(got[0], -1.0f) << "wrote outside its view";
  }
}

}  // namespace
}  // namespace mb
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
#include "ops/causal_conv.h"
#include "ops/matmul.h"
#include "ops/rms_norm.h"
#include "ops/selective_scan.h"
#include "vulkan/vulkan_test_util.h"

namespace mb {
namespace {

using test::random_floats;
using vulkan::Buffer;

const ComputeContext kScalar{1, Isa::Scalar};
constexpr double kMaxNmse = 1e-7;

class VulkanOps : public test::VulkanTest {
 protected:
  // Checks both tiers: NMSE against the reference, and the CPU kernel's bits where possible.
  void expect_matches(const std::vector<float>& gpu, const std::vector<float>& cpu,
                      const std::vector<float>& reference, const std::string& what) {
    EXPECT_LE(test::nmse(gpu, reference), kMaxNmse) << what;
    if (ctx().exact_fma()) {
      const long diff = test::first_bit_difference(gpu, cpu);
      EXPECT_EQ(diff, -1) << what << ": element " << diff << " gpu " << (diff >= 0 ? gpu[diff] : 0.0f)
                          << " cpu " << (diff >= 0 ? cpu[diff] : 0.0f);
    }
  }
  void run(const std::function<void(vulkan::CommandSequence&)>& record) {
    vulkan::CommandSequence sequence(ctx(), 16);
    sequence.begin();
    record(sequence);
    sequence.end();
    sequence.run();
  }
};

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

// The batched ops run on the shared context (one dispatch per kMaxGpuParts parts where the
// device indexes buffer arrays) and on a context that pretends it cannot (one dispatch per part,
// the fallback). Both must give the CPU kernels' bits.
vulkan::Context& fallback_context(const vulkan::Context& shared) {
  static std::unique_ptr<vulkan::Context> context = [&] {
    vulkan::ContextOptions options;
    options.device_index = shared.info().index;
    options.validation = shared.validation_enabled();
    options.buffer_arrays = false;
    return std::make_unique<vulkan::Context>(options);
  }();
  return *context;
}

// Rounds of parts with different lengths (1 included), numbered so that a part's rows need not
// follow the previous part's: the rows of part i start at first_rows()[i].
struct PartLayout {
  std::vector<int64_t> lengths;
  std::vector<int64_t> first_rows;
  int64_t total_rows = 0;
};

PartLayout layout_of(const std::vector<int64_t>& lengths) {
  // Parts are laid out in reverse order with one unused row between them.
  PartLayout layout{lengths, std::vector<int64_t>(lengths.size()), 0};
  for (size_t i = lengths.size(); i-- > 0;) {
    layout.first_rows[i] = layout.total_rows + 1;
    layout.total_rows += lengths[i] + 1;
  }
  return layout;
}

std::vector<std::vector<int64_t>> part_length_cases() {
  std::vector<int64_t> many;  // more parts than one dispatch takes
  for (int i = 0; i < vulkan::kMaxGpuParts + 3; ++i) many.push_back(1 + i % 3);
  return {{1}, {5, 1, 17}, many};
}

class VulkanBatchedOps : public VulkanOps {
 protected:
  void TearDown() override {
    for (const std::string& error : fallback_context(ctx()).validation_errors())
      ADD_FAILURE() << "Vulkan validation error (fallback context): " << error;
    fallback_context(ctx()).clear_validation_errors();
    VulkanOps::TearDown();
  }
  // Records and runs `record` on `context`; returns the number of dispatches.
  uint32_t run_on(vulkan::Context& context, const std::function<void(vulkan::CommandSequence&)>& record) {
    vulkan::CommandSequence sequence(context, 64);
    sequence.begin();
    record(sequence);
    sequence.end();
    sequence.run();
    return sequence.dispatch_count();
  }
  // Dispatches a batched op over `parts` parts should take on `context`.
  uint32_t expected_dispatches(vulkan::Context& context, size_t parts) {
    const size_t per = context.buffer_arrays() ? vulkan::kMaxGpuParts : 1;
    return static_cast<uint32_t>((parts + per - 1) / per);
  }
};

TEST_F(VulkanBatchedOps, CausalConvOverPartsEqualsCpuAndCarriesHistoryAcrossPieces) {
  for (vulkan::Context* context : {&ctx(), &fallback_context(ctx())}) {
    for (const std::vector<int64_t>& lengths : part_length_cases()) {
      for (int64_t channels : {1, 37, 130}) {
        for (int kernel : {1, 4}) {
          if (lengths.size() > 3 && (channels != 37 || kernel != 4)) continue;  // one shape suffices
          const PartLayout layout = layout_of(lengths);
          const size_t parts = lengths.size();
          const std::string what = std::string(context == &ctx() ? "" : "fallback ") + std::to_string(parts) +
                                   " parts C=" + std::to_string(channels) + " K=" + std::to_string(kernel);
          const bool has_bias = channels != 37;
          const int64_t ldx = 2 * channels, rows = layout.total_rows;  // the x half of Mamba-1's xz rows
          const auto x = random_floats(rows * ldx, 7), w = random_floats(kernel * channels, 8),
                     bias = random_floats(channels, 9);
          // Each part's history sits at an offset of its state buffer, as in a layer's state.
          const int64_t history_at = 3, history_floats = (kernel - 1) * channels;
          std::vector<std::vector<float>> states0, cpu_states, reference_states;
          std::vector<float> cpu(rows * channels, 0.0f), reference(rows * channels, 0.0f);
          std::vector<CausalConvArgs> args;
          for (size_t p = 0; p < parts; ++p) {
            states0.push_back(random_floats(history_at + history_floats, 10 + p));
            cpu_states.push_back(states0.back());
            reference_states.push_back(states0.back());
          }
          for (size_t p = 0; p < parts; ++p) {
            const int64_t r = layout.first_rows[p];
            args.push_back({x.data() + r * ldx, ldx, lengths[p], channels, kernel, w.data(),
                            has_bias ? bias.data() : nullptr, cpu_states[p].data() + history_at,
                            cpu.data() + r * channels, channels});
            CausalConvArgs ref = args.back();
            ref.history = reference_states[p].data() + history_at;
            ref.y = reference.data() + r * channels;
            causal_conv_silu_reference(ref);
          }
          causal_conv_silu(kScalar, args);

          Buffer x_buffer = Buffer::from_floats(*context, x), w_buffer = Buffer::from_floats(*context, w),
                 bias_buffer = Buffer::from_floats(*context, bias);
          // Whole parts in one round, then the same positions two per round.
          for (int64_t piece : {int64_t{1} << 20, int64_t{2}}) {
            Buffer y_buffer = Buffer::from_floats(*context, std::vector<float>(rows * channels, 0.0f));
            std::vector<Buffer> states;
            for (size_t p = 0; p < parts; ++p) states.push_back(Buffer::from_floats(*context, states0[p]));
            uint32_t dispatches = 0, rounds = 0;
            dispatches = run_on(*context, [&](vulkan::CommandSequence& s) {
              for (int64_t t0 = 0;; t0 += piece) {
                std::vector<vulkan::GpuPart> round;
                for (size_t p = 0; p < parts; ++p)
                  if (t0 < lengths[p])
                    round.push_back(
                        {&states[p], layout.first_rows[p] + t0, std::min(piece, lengths[p] - t0)});
                if (round.empty()) break;
                vulkan::GpuCausalConvArgs g;
                g.x = &x_buffer;
                g.ldx = ldx;
                g.channels = channels;
                g.kernel_size = kernel;
                g.weight = &w_buffer;
                g.bias = has_bias ? &bias_buffer : nullptr;
                g.history_offset = history_at;
                g.y = &y_buffer;
                g.ldy = channels;
                g.parts = round;
                vulkan::record_causal_conv_silu(s, g);
                rounds += expected_dispatches(*context, round.size());
              }
            });
            EXPECT_EQ(dispatches, rounds) << what;
            const std::string where = what + (piece == 2 ? " in pieces of 2" : " whole");
            expect_matches(y_buffer.to_floats(), cpu, reference, where);
            for (size_t p = 0; p < parts; ++p)  // copies of inputs: exact
              EXPECT_TRUE(test::same_bits(states[p].to_floats(), cpu_states[p])) << where << " part " << p;
          }
        }
      }
    }
  }
}

struct ScanData {
  std::vector<float> u, dt, bc, z, a_base2, d_skip;
};

ScanData make_scan_data(int64_t rows, int64_t channels, int64_t d_state) {
  ScanData d;
  d.u = random_floats(rows * channels, 11);
  d.dt = random_floats(rows * channels, 12, 0.5f);
  for (float& v : d.dt) v = std::fabs(v) + 1e-3f;
  d.bc = random_floats(rows * 2 * d_state, 13);
  d.z = random_floats(rows * channels, 14, 2.0f);
  d.a_base2.resize(d_state * channels);
  for (int64_t n = 0; n < d_state; ++n)
    for (int64_t c = 0; c < channels; ++c) d.a_base2[n * channels + c] = -float(n + 1) * (1.0f + 0.01f * c);
  d.d_skip = random_floats(channels, 15);
  return d;
}

TEST_F(VulkanBatchedOps, SelectiveScanOverPartsEqualsCpuOverStateSizes) {
  for (vulkan::Context* context : {&ctx(), &fallback_context(ctx())}) {
    for (const std::vector<int64_t>& lengths : part_length_cases()) {
      for (int64_t d_state : {1, 16, 64}) {
        for (int64_t channels : {1, 37}) {
          if (lengths.size() > 3 && (d_state != 16 || channels != 37)) continue;  // one shape suffices
          const PartLayout layout = layout_of(lengths);
          const size_t parts = lengths.size();
          const int64_t rows = layout.total_rows;
          const bool gate = channels != 1;
          const std::string what = std::string(context == &ctx() ? "" : "fallback ") + std::to_string(parts) +
                                   " parts N=" + std::to_string(d_state) + " D=" + std::to_string(channels) +
                                   (gate ? " gate" : "");
          const ScanData d = make_scan_data(rows, channels, d_state);
          const int64_t state_at = 5, state_floats = d_state * channels;
          std::vector<std::vector<float>> states0, cpu_states, reference_states;
          for (size_t p = 0; p < parts; ++p) {
            states0.push_back(random_floats(state_at + state_floats, 16 + p));
            cpu_states.push_back(states0.back());
            reference_states.push_back(states0.back());
          }
          std::vector<float> cpu(rows * channels, 0.0f), reference(rows * channels, 0.0f);
          std::vector<SelectiveScanArgs> args;
          for (size_t p = 0; p < parts; ++p) {
            const int64_t r = layout.first_rows[p];
            SelectiveScanArgs a;
            a.length = lengths[p];
            a.channels = channels;
            a.d_state = d_state;
            a.u = d.u.data() + r * channels;
            a.ldu = channels;
            a.dt = d.dt.data() + r * channels;
            a.lddt = channels;
            a.b = d.bc.data() + r * 2 * d_state;
            a.c = d.bc.data() + r * 2 * d_state + d_state;
            a.ldbc = 2 * d_state;
            a.z = gate ? d.z.data() + r * channels : nullptr;
            a.ldz = channels;
            a.a_base2 = d.a_base2.data();
            a.d_skip = d.d_skip.data();
            a.state = reference_states[p].data() + state_at;
            a.y = reference.data() + r * channels;
            a.ldy = channels;
            selective_scan_reference(a);
            a.state = cpu_states[p].data() + state_at;
            a.y = cpu.data() + r * channels;
            args.push_back(a);
          }
          selective_scan(kScalar, args);

          Buffer u = Buffer::from_floats(*context, d.u), dt = Buffer::from_floats(*context, d.dt),
                 bc = Buffer::from_floats(*context, d.bc), z = Buffer::from_floats(*context, d.z),
                 a_base2 = Buffer::from_floats(*context, d.a_base2),
                 d_skip = Buffer::from_floats(*context, d.d_skip),
                 y = Buffer::from_floats(*context, std::vector<float>(rows * channels, 0.0f));
          std::vector<Buffer> states;
          std::vector<vulkan::GpuPart> gpu_parts;
          for (size_t p = 0; p < parts; ++p) states.push_back(Buffer::from_floats(*context, states0[p]));
          for (size_t p = 0; p < parts; ++p)
            gpu_parts.push_back({&states[p], layout.first_rows[p], lengths[p]});
          vulkan::GpuSelectiveScanArgs g;
          g.channels = channels;
          g.d_state = d_state;
          g.u = &u;
          g.ldu = channels;
          g.dt = &dt;
          g.lddt = channels;
          g.bc = &bc;
          g.b_offset = 0;
          g.c_offset = d_state;
          g.ldbc = 2 * d_state;
          g.z = gate ? &z : nullptr;
          g.ldz = channels;
          g.a_base2 = &a_base2;
          g.d_skip = &d_skip;
          g.state_offset = state_at;
          g.y = &y;
          g.ldy = channels;
          g.parts = gpu_parts;
          const uint32_t dispatches =
              run_on(*context, [&](vulkan::CommandSequence& s) { vulkan::record_selective_scan(s, g); });
          EXPECT_EQ(dispatches, expected_dispatches(*context, parts)) << what;
          expect_matches(y.to_floats(), cpu, reference, what);
          for (size_t p = 0; p < parts; ++p)
            expect_matches(states[p].to_floats(), cpu_states[p], reference_states[p],
                           what + " state of part " + std::to_string(p));
        }
      }
    }
  }
}

TEST_F(VulkanBatchedOps, SelectiveScanWithFusedDtProjEqualsCpuDtProjThenScan) {
  // The scan computing dt itself (GpuSelectiveScanFusedDt) against the CPU's dt_proj (matmul
  // with bias and softplus) followed by its scan, and against the GPU's own matmul followed by
  // the plain scan. dt_low, B and C share one buffer at an offset, rows wider than their columns,
  // as in x_proj's output; 70 channels span two weight panels.
  const std::vector<int64_t> lengths = {1, 5, 17};
  const PartLayout layout = layout_of(lengths);
  const int64_t rows = layout.total_rows, state_at = 5;
  for (vulkan::Context* context : {&ctx(), &fallback_context(ctx())}) {
    for (DType dtype : {DType::F32, DType::BF16, DType::F16}) {
      for (int64_t rank : {1, 3, 16, 48}) {
        for (int64_t d_state : {1, 16}) {
          if (context != &ctx() && (rank != 16 || d_state != 16)) continue;  // one shape suffices
          const int64_t channels = rank == 16 ? 70 : 37;
          const int64_t low_at = 2, ldbc = rank + 2 * d_state + 3;
          const std::string what = std::string(context == &ctx() ? "" : "fallback ") +
                                   std::string(dtype_name(dtype)) + " R=" + std::to_string(rank) +
                                   " N=" + std::to_string(d_state) + " D=" + std::to_string(channels);
          ScanData d = make_scan_data(rows, channels, d_state);
          d.bc = random_floats(low_at + rows * ldbc, 13);  // [rows, ldbc]: dt_low, B, C, padding
          const auto encoded = encode_f32(random_floats(channels * rank, 17, 0.5f), dtype);
          const std::vector<uint8_t> packed = pack_weights(encoded.data(), dtype, channels, rank, dtype);
          const auto dt_bias = random_floats(channels, 18);

          // The CPU: dt_proj [rows, R] -> [rows, D] with softplus, then the scan over the parts.
          std::vector<float> dt(rows * channels), dt_reference(rows * channels);
          MatmulArgs product{d.bc.data() + low_at,
                             ldbc,
                             rows,
                             {packed.data(), dtype, channels, rank},
                             dt_bias.data(),
                             dt.data(),
                             channels,
                             false,
                             true};
          matmul(kScalar, product);
          product.y = dt_reference.data();
          matmul_reference(product);
          std::vector<std::vector<float>> states0, cpu_states, reference_states;
          std::vector<float> cpu(rows * channels, 0.0f), reference(rows * channels, 0.0f);
          std::vector<SelectiveScanArgs> args;
          for (size_t p = 0; p < lengths.size(); ++p) {
            states0.push_back(random_floats(state_at + d_state * channels, 16 + p));
            cpu_states.push_back(states0.back());
            reference_states.push_back(states0.back());
          }
          for (size_t p = 0; p < lengths.size(); ++p) {
            const int64_t r = layout.first_rows[p];
            const float* b = d.bc.data() + low_at + r * ldbc + rank;
            SelectiveScanArgs a{lengths[p],
                                channels,
                                d_state,
                                d.u.data() + r * channels,
                                channels,
                                dt_reference.data() + r * channels,
                                channels,
                                b,
                                b + d_state,
                                ldbc,
                                d.z.data() + r * channels,
                                channels,
                                d.a_base2.data(),
                                d.d_skip.data(),
                                reference_states[p].data() + state_at,
                                reference.data() + r * channels,
                                channels};
            selective_scan_reference(a);
            a.dt = dt.data() + r * channels;
            a.state = cpu_states[p].data() + state_at;
            a.y = cpu.data() + r * channels;
            args.push_back(a);
          }
          selective_scan(kScalar, args);

          Buffer u = Buffer::from_floats(*context, d.u), bc = Buffer::from_floats(*context, d.bc),
                 z = Buffer::from_floats(*context, d.z), a_base2 = Buffer::from_floats(*context, d.a_base2),
                 d_skip = Buffer::from_floats(*context, d.d_skip),
                 bias = Buffer::from_floats(*context, dt_bias),
                 dt_gpu(*context, rows * channels * sizeof(float)), w(*context, packed.size());
          w.upload(packed.data(), packed.size());
          // Fused, then unfused (the GPU's dt_proj GEMM into dt_gpu, then the plain scan).
          std::vector<std::vector<float>> outputs;
          std::vector<std::vector<std::vector<float>>> final_states;
          for (bool fused : {true, false}) {
            Buffer y = Buffer::from_floats(*context, std::vector<float>(rows * channels, 0.0f));
            std::vector<Buffer> states;
            std::vector<vulkan::GpuPart> gpu_parts;
            for (size_t p = 0; p < lengths.size(); ++p)
              states.push_back(Buffer::from_floats(*context, states0[p]));
            for (size_t p = 0; p < lengths.size(); ++p)
              gpu_parts.push_back({&states[p], layout.first_rows[p], lengths[p]});
            vulkan::GpuSelectiveScanArgs g;
            g.channels = channels;
            g.d_state = d_state;
            g.u = &u;
            g.ldu = channels;
            g.bc = &bc;
            g.b_offset = low_at + rank;
            g.c_offset = low_at + rank + d_state;
            g.ldbc = ldbc;
            g.z = &z;
            g.ldz = channels;
            g.a_base2 = &a_base2;
            g.d_skip = &d_skip;
            g.state_offset = state_at;
            g.y = &y;
            g.ldy = channels;
            g.parts = gpu_parts;
            if (fused) {
              g.fused_dt = vulkan::GpuSelectiveScanFusedDt{&w, 0, dtype, rank, &bias, 0, low_at};
            } else {
              g.dt = &dt_gpu;
              g.lddt = channels;
            }
            const uint32_t dispatches = run_on(*context, [&](vulkan::CommandSequence& s) {
              if (!fused)
                vulkan::record_matmul(s, {&bc, low_at, ldbc, rows, &w, 0, dtype, channels, rank, &bias, 0,
                                          &dt_gpu, 0, channels, false, true});
              vulkan::record_selective_scan(s, g);
            });
            EXPECT_EQ(dispatches, expected_dispatches(*context, lengths.size()) + (fused ? 0 : 1)) << what;
            outputs.push_back(y.to_floats());
            final_states.emplace_back();
            for (const Buffer& state : states) final_states.back().push_back(state.to_floats());
          }
          expect_matches(outputs[0], cpu, reference, what);
          EXPECT_TRUE(test::same_bits(outputs[0], outputs[1])) << what << ": fused != unfused";
          for (size_t p = 0; p < lengths.size(); ++p) {
            const std::string part = what + " state of part " + std::to_string(p);
            expect_matches(final_states[0][p], cpu_states[p], reference_states[p], part);
            EXPECT_TRUE(test::same_bits(final_states[0][p], final_states[1][p]))
                << part << ": fused != unfused";
          }
        }
      }
    }
  }
}

TEST_F(VulkanBatchedOps, FusedDtProjOutsideItsBuffersIsRefused) {
  Buffer rows(ctx(), 256 * sizeof(float)), state(ctx(), 64 * sizeof(float)), small(ctx(), 8 * sizeof(float));
  const vulkan::GpuPart parts[] = {{&state, 0, 2}};
  const vulkan::GpuSelectiveScanFusedDt fused{&rows, 0, DType::F32, 2, &rows, 0, 0};
  vulkan::GpuSelectiveScanArgs g;
  g.channels = 4;
  g.d_state = 2;
  g.u = g.bc = g.a_base2 = g.d_skip = g.y = &rows;
  g.ldu = g.ldbc = g.ldy = 8;
  g.parts = parts;
  vulkan::CommandSequence sequence(ctx(), 4);
  sequence.begin();
  const auto refused = [&](const vulkan::GpuSelectiveScanFusedDt& f, const std::string& name) {
    g.fused_dt = f;
    try {
      vulkan::record_selective_scan(sequence, g);
      ADD_FAILURE() << name << " was accepted";
    } catch (const Error& error) {
      EXPECT_NE(std::string(error.what()).find(name), std::string::npos) << error.what();
    }
  };
  vulkan::GpuSelectiveScanFusedDt f = fused;
  f.weight = &small;  // one 64-row panel of 2 columns needs 128 floats
  refused(f, "dt_proj weights");
  f = fused;
  f.bias = nullptr;
  refused(f, "dt_proj bias");
  f = fused;
  f.dt_low_offset = 250;
  refused(f, "dt_low");
  f = fused;
  f.rank = 0;
  refused(f, "rank");
  EXPECT_EQ(sequence.dispatch_count(), 0u);
  g.fused_dt = fused;
  vulkan::record_selective_scan(sequence, g);
  EXPECT_EQ(sequence.dispatch_count(), 1u);
  sequence.end();
}

TEST_F(VulkanBatchedOps, PartsSharingAStateAreRefused) {
  Buffer state(ctx(), 64 * sizeof(float)), rows(ctx(), 64 * sizeof(float)), w(ctx(), 64 * sizeof(float));
  const vulkan::GpuPart parts[] = {{&state, 0, 1}, {&state, 1, 1}};
  vulkan::GpuCausalConvArgs g;
  g.x = &rows;
  g.ldx = 4;
  g.channels = 4;
  g.kernel_size = 2;
  g.weight = &w;
  g.y = &rows;
  g.ldy = 4;
  g.parts = parts;
  vulkan::CommandSequence sequence(ctx(), 4);
  sequence.begin();
  EXPECT_THROW(vulkan::record_causal_conv_silu(sequence, g), Error);
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

// SPDX-License-Identifier: MIT
// The device layer: replayed command sequences, per-dispatch timestamps, clean errors for bad
// requests, and the fma probe's verdict (the bitwise tests are only as good as that verdict).
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "backends/vulkan/vulkan_ops.h"
#include "common/test_util.h"
#include "core/error.h"
#include "ops/activations.h"
#include "ops/matmul.h"
#include "vulkan/vulkan_test_util.h"

namespace mb {
namespace {

using test::random_floats;
using vulkan::Buffer;

class VulkanDevice : public test::VulkanTest {};

TEST_F(VulkanDevice, ListsTheContextsDevice) {
  const auto devices = vulkan::list_devices();
  ASSERT_GT(devices.size(), 0u);
  EXPECT_EQ(devices[ctx().info().index].name, ctx().info().name);
  EXPECT_GT(ctx().info().subgroup_size, 0u);
  EXPECT_GE(ctx().info().max_shared_memory_bytes, 16384u);  // the least Vulkan allows
}

TEST_F(VulkanDevice, CliListsTheDevices) {
  const std::string out = test::make_temp_dir("vulkan_devices") + "/out.txt";
  ASSERT_EQ(std::system((std::string(MB_CLI_PATH) + " devices >" + out).c_str()), 0);
  std::FILE* file = std::fopen(out.c_str(), "r");
  ASSERT_NE(file, nullptr);
  std::string text(4096, '\0');
  text.resize(std::fread(text.data(), 1, text.size(), file));
  std::fclose(file);
  EXPECT_NE(text.find("CPU: instruction set"), std::string::npos) << text;
  EXPECT_NE(text.find("Vulkan device " + std::to_string(ctx().info().index) + ": " + ctx().info().name),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("subgroup size " + std::to_string(ctx().info().subgroup_size)), std::string::npos)
      << text;
}

TEST_F(VulkanDevice, RecordedSequenceReplaysWithNewInputs) {
  // A decode step: recorded once, replayed for each new input row (uploaded between runs).
  const int64_t n = 70, k = 33;
  const auto weights = random_floats(n * k, 41);
  const std::vector<uint8_t> packed = pack_weights(weights.data(), DType::F32, n, k, DType::F32);
  Buffer x(ctx(), k * sizeof(float)), y(ctx(), n * sizeof(float)), w(ctx(), packed.size());
  w.upload(packed.data(), packed.size());
  vulkan::CommandSequence step(ctx(), 4);
  step.begin();
  vulkan::record_matmul(step, {&x, 0, k, 1, &w, 0, DType::F32, n, k, nullptr, 0, &y, 0, n});
  vulkan::record_elementwise(step, {vulkan::ElementwiseOp::SiluGate, 1, n, &y, 0, n, &y, 0, n, &y, 0, n});
  step.end();
  ASSERT_EQ(step.dispatch_count(), 2u);
  for (uint64_t token = 0; token < 3; ++token) {
    const auto input = random_floats(k, 50 + token);
    x.upload(input.data(), input.size() * sizeof(float));
    step.run();
    std::vector<float> expected(n);
    matmul(ComputeContext{1, Isa::Scalar},
           {input.data(), k, 1, {packed.data(), DType::F32, n, k}, nullptr, expected.data(), n});
    for (float& v : expected) v = v * silu_f32(v);
    const auto got = y.to_floats();
    EXPECT_LE(test::max_abs_diff(got, expected), 1e-5 * (test::max_abs(expected) + 1)) << "token " << token;
    if (ctx().exact_fma()) {
      EXPECT_TRUE(test::same_bits(got, expected)) << "token " << token;
    }
    const auto times = step.last_timings();
    if (ctx().info().timestamps) {
      ASSERT_EQ(times.size(), 2u);
      EXPECT_EQ(times[0].label, "matmul 1x70x33");
      for (const auto& t : times) EXPECT_GE(t.milliseconds, 0.0);
    }
  }
}

TEST_F(VulkanDevice, BadRequestsThrowErrors) {
  Buffer small(ctx(), 16 * sizeof(float)), w(ctx(), 64 * 4 * sizeof(float));
  vulkan::CommandSequence sequence(ctx(), 2);
  sequence.begin();
  // y needs 2 rows of 64 floats; the buffer holds 16.
  EXPECT_THROW(
      vulkan::record_matmul(sequence, {&small, 0, 4, 2, &w, 0, DType::F32, 64, 4, nullptr, 0, &small, 0, 64}),
      Error);
  EXPECT_THROW(vulkan::record_rms_norm(sequence, {&small, 10, 8, 1, 8, &small, 0, 1e-5f, &small, 0, 8}),
               Error);
  vulkan::GpuSelectiveScanArgs scan;
  scan.d_state = 300;
  EXPECT_THROW(vulkan::record_selective_scan(sequence, scan), Error);
  EXPECT_EQ(sequence.dispatch_count(), 0u);
  sequence.end();
  std::vector<float> too_many(17);
  EXPECT_THROW(small.upload(too_many.data(), too_many.size() * sizeof(float)), Error);
  EXPECT_THROW(Buffer(ctx(), ctx().info().max_storage_buffer_bytes + 1), Error);
  vulkan::ContextOptions options;
  options.device_index = static_cast<int>(vulkan::list_devices().size());
  EXPECT_THROW(vulkan::Context{options}, Error);
}

TEST_F(VulkanDevice, ValidationErrorsAreRecorded) {
  if (!ctx().validation_enabled()) GTEST_SKIP() << "the validation layer is not installed";
  // A buffer without usage flags is invalid (VUID-VkBufferCreateInfo-usage-requiredbitmask) but
  // harmless to every driver; the layer must report it, or the other tests' checks mean nothing.
  VkBufferCreateInfo create{};
  create.sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO;
  create.size = 16;
  create.usage = 0;
  VkBuffer buffer = VK_NULL_HANDLE;
  if (vkCreateBuffer(ctx().device(), &create, nullptr, &buffer) == VK_SUCCESS)
    vkDestroyBuffer(ctx().device(), buffer, nullptr);
  EXPECT_FALSE(ctx().validation_errors().empty());
  ctx().clear_validation_errors();  // expected here; TearDown fails on any that remain
}

TEST_F(VulkanDevice, FmaProbeVerdictIsHonest) {
  // The device's own fma(), whatever the probe said, against a fused fma on the host: if the
  // probe calls it fused, it must give fused bits on fresh inputs; if not, they must differ
  // somewhere (so the bitwise tests above really depend on the variant the probe picked).
  vulkan::ContextOptions options;
  options.device_index = ctx().info().index;
  options.validation = ctx().validation_enabled();
  options.fma = vulkan::FmaMode::Native;
  vulkan::Context native(options);
  std::vector<float> a = random_floats(256, 61), b = random_floats(256, 62), c(256), fused(256);
  for (size_t i = 0; i < a.size(); ++i) {
    c[i] = -(a[i] * b[i]);
    fused[i] = std::fma(a[i], b[i], c[i]);
  }
  Buffer in_a = Buffer::from_floats(native, a), in_b = Buffer::from_floats(native, b),
         in_c = Buffer::from_floats(native, c), out(native, a.size() * sizeof(float));
  const struct { uint32_t count, function; } push{256, 0};
  vulkan::CommandSequence sequence(native, 1);
  sequence.begin();
  const Buffer* buffers[] = {&in_a, &in_b, &in_c, &out};
  sequence.dispatch({"math_probe", 4, 8, {}}, buffers, &push, sizeof push, {4, 1, 1}, "fma");
  sequence.end();
  sequence.run();
  const bool same = test::same_bits(out.to_floats(), fused);
  EXPECT_EQ(same, native.exact_fma());
  std::printf("[vulkan] the device's own fma() is %s\n", same ? "fused" : "NOT fused (mul + add)");
  EXPECT_TRUE(native.validation_errors().empty());
}

}  // namespace
}  // namespace mb

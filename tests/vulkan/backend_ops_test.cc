// SPDX-License-Identifier: MIT
// Every case of the op registry (common/op_cases.h) on Vulkan device 0 under the validation
// layer, failing on any error it reports: within the case's tolerance of the double reference,
// and, on a device whose fma is exact (lavapipe emulates one), every float the bits of the CPU's
// scalar kernels. Cases of the batched ops over several parts of a round, and of the ops whose
// shaders use subgroup shuffles, also run on a backend whose context does without buffer arrays
// and subgroup shuffles: the one-dispatch-per-part fallback and the shared-memory exchanges. A
// case the device cannot run is skipped with the reason the backend gives.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "backends/cpu/cpu_backend.h"
#include "backends/vulkan/vulkan_backend.h"
#include "common/op_cases.h"
#include "common/test_util.h"
#include "core/error.h"

namespace mb {
namespace {

// Null when the machine has no Vulkan device; a device that exists but cannot be opened throws,
// which fails the test rather than skipping it. Without buffer arrays the context also does
// without subgroup shuffles: the fallbacks are tested together.
std::unique_ptr<vulkan::VulkanBackend> make_device(bool buffer_arrays) {
  vulkan::ContextOptions options;
  options.validation = true;
  options.buffer_arrays = buffer_arrays;
  options.subgroup_ops = buffer_arrays;
  std::unique_ptr<vulkan::VulkanBackend> backend;
  try {
    backend = std::make_unique<vulkan::VulkanBackend>(options);
  } catch (const Error&) {
    if (vulkan::list_devices().empty()) return nullptr;
    throw;
  }
  const vulkan::Context& context = backend->context();
  std::printf("[vulkan] %s%s, subgroup shuffles %s, fma %s, validation %s\n", backend->description().c_str(),
              buffer_arrays ? "" : " without buffer arrays", context.subgroup_ops() ? "on" : "off",
              context.exact_fma() ? "exact" : "NOT exact (the bitwise tier is skipped)",
              context.validation_enabled() ? "on" : "off (layer not installed)");
  return backend;
}

// Device 0's backend, with or without buffer arrays, made on first use and kept for the process
// (each compiles its pipelines once). Each static is initialized with its backend, so it is
// destroyed before the validation layer that the backend's creation loaded.
const vulkan::VulkanBackend* device(bool buffer_arrays) {
  if (buffer_arrays) {
    static const std::unique_ptr<vulkan::VulkanBackend> with_arrays = make_device(true);
    return with_arrays.get();
  }
  static const std::unique_ptr<vulkan::VulkanBackend> without_arrays = make_device(false);
  return without_arrays.get();
}

class VulkanBackendOps : public ::testing::TestWithParam<const test::OpCase*> {};

TEST_P(VulkanBackendOps, MatchesTheReferenceAndTheCpuBits) {
  const test::OpCase& c = *GetParam();
  if (device(true) == nullptr) GTEST_SKIP() << "no Vulkan device on this machine";
  const std::string why = test::why_unsupported(c, *device(true));
  if (!why.empty()) GTEST_SKIP() << "not supported: " << why;
  const test::OpRecord reference = test::reference_record(c);
  const CpuBackend cpu;
  const test::OpRecord scalar = test::run_op(c.body, &cpu, {1, Isa::Scalar});
  double worst = 0.0;
  // The ops whose shaders exchange values through subgroup shuffles where the device has them
  // (the quantized GEMV's quads among them).
  const bool quantized = std::any_of(c.queries.begin(), c.queries.end(),
                                     [](const OpQuery& q) { return dtype_is_quantized(q.dtype); });
  const bool uses_subgroups = c.op == "mamba2_scan" || c.op == "mamba3_scan" || c.op == "gated_rms_norm" ||
                              (c.op == "matmul" && quantized);
  const bool fallbacks = c.several_parts || uses_subgroups;
  for (bool buffer_arrays : fallbacks ? std::vector<bool>{true, false} : std::vector<bool>{true}) {
    const vulkan::VulkanBackend& backend = *device(buffer_arrays);
    vulkan::Context& context = backend.context();
    context.clear_validation_errors();
    const std::string on =
        std::string("vulkan") + (buffer_arrays ? "" : " without buffer arrays and shuffles");
    const test::OpRecord got = test::run_op(c.body, &backend, {});
    const test::OpRecord* bits = context.exact_fma() ? &scalar : nullptr;
    worst = std::max(worst, test::expect_record(got, reference, bits, c.tolerance, on));
    for (const std::string& error : context.validation_errors())
      ADD_FAILURE() << on << ": Vulkan validation error: " << error;
  }
  std::printf("[ nmse ] worst %.3g of %.3g allowed\n", worst, c.tolerance);
}

INSTANTIATE_TEST_SUITE_P(Registry, VulkanBackendOps, ::testing::ValuesIn(test::selected_cases(false)),
                         [](const auto& info) { return info.param->name(); });

}  // namespace
}  // namespace mb

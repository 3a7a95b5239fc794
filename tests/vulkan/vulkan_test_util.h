// Shared setup of the Vulkan tests: one context per test binary (pipelines compile once), with
// the validation layer on, and a fixture that fails any test during which the layer reported an
// error. Tests skip only when the machine has no Vulkan device at all.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "backends/vulkan/vulkan_buffer.h"
#include "backends/vulkan/vulkan_commands.h"
#include "backends/vulkan/vulkan_context.h"

namespace mb::test {

// The shared context, or null when no Vulkan device exists. A device that exists but cannot be
// opened fails the calling test (through the exception) rather than skipping it.
vulkan::Context* vulkan_test_context();

class VulkanTest : public ::testing::Test {
 protected:
  void SetUp() override;
  void TearDown() override;
  vulkan::Context& ctx() { return *context_; }
  // The scalar CPU kernels are the ones every instruction set equals bit for bit.
  vulkan::Context* context_ = nullptr;
};

// Normalized mean squared error of `got` against a double reference.
double nmse(const std::vector<float>& got, const std::vector<double>& reference);
double nmse(const std::vector<float>& got, const std::vector<float>& reference);

// The index of the first element whose bits differ, or -1.
long first_bit_difference(const std::vector<float>& a, const std::vector<float>& b);

}  // namespace mb::test

// SPDX-License-Identifier: MIT
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
#include "common/test_util.h"

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

}  // namespace mb::test

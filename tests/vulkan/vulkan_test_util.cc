// SPDX-License-Identifier: MIT
#include "vulkan/vulkan_test_util.h"

#include <cstdio>
#include <memory>

namespace mb::test {

vulkan::Context* vulkan_test_context() {
  // Created on first use and kept until the process exits, so every test shares its pipelines.
  static std::unique_ptr<vulkan::Context> context = [] {
    std::unique_ptr<vulkan::Context> created;
    if (vulkan::list_devices().empty()) return created;
    vulkan::ContextOptions options;
    options.validation = true;  // tests always run under the validation layer when it is installed
    created = std::make_unique<vulkan::Context>(options);
    const auto& info = created->info();
    std::printf("[vulkan] %s (%s, %s), subgroup %u, fma %s, validation %s\n", info.name.c_str(),
                info.type.c_str(), info.driver.c_str(), info.subgroup_size,
                created->emulated_fma() ? "emulated from double"
                                        : (created->exact_fma() ? "native fused" : "native, NOT fused"),
                created->validation_enabled() ? "on" : "off (layer not installed)");
    return created;
  }();
  return context.get();
}

void VulkanTest::SetUp() {
  context_ = vulkan_test_context();
  if (context_ == nullptr) GTEST_SKIP() << "no Vulkan device on this machine";
  context_->clear_validation_errors();
}

void VulkanTest::TearDown() {
  if (context_ == nullptr) return;
  const std::vector<std::string> errors = context_->validation_errors();
  for (const std::string& error : errors) ADD_FAILURE() << "Vulkan validation error: " << error;
  context_->clear_validation_errors();
}

}  // namespace mb::test

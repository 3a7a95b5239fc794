#include "vulkan/vulkan_test_util.h"

#include <cmath>
#include <cstdio>
#include <cstring>
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

double nmse(const std::vector<float>& got, const std::vector<double>& reference) {
  if (got.size() != reference.size()) return INFINITY;
  double error = 0.0, energy = 0.0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double diff = got[i] - reference[i];
    error += diff * diff;
    energy += reference[i] * reference[i];
  }
  return energy > 0.0 ? error / energy : error;
}

double nmse(const std::vector<float>& got, const std::vector<float>& reference) {
  return nmse(got, std::vector<double>(reference.begin(), reference.end()));
}

long first_bit_difference(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size()) return 0;
  for (size_t i = 0; i < a.size(); ++i)
    if (std::memcmp(&a[i], &b[i], sizeof(float)) != 0) return static_cast<long>(i);
  return -1;
}

}  // namespace mb::test

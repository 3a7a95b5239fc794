// make_device_executor of a build with the Vulkan backend.
#include <string>

#include "backends/vulkan/vulkan_context.h"
#include "core/error.h"
#include "model/mamba1.h"
#include "model/vulkan/vulkan_mamba1.h"

namespace mb {

std::unique_ptr<DeviceExecutor> make_device_executor(const Model& model, const DeviceSpec& spec) {
  if (spec.kind != DeviceKind::Vulkan) throw Error("device '" + spec.text() + "' has no executor");
  std::string why_none;
  const std::vector<vulkan::DeviceInfo> devices = vulkan::list_devices(&why_none);
  if (devices.empty()) throw Error("device '" + spec.text() + "': no Vulkan device (" + why_none + ")");
  if (spec.index < 0 || spec.index >= static_cast<int>(devices.size()))
    throw Error("device '" + spec.text() + "' is out of range: this machine has " +
                std::to_string(devices.size()) + " Vulkan device" + (devices.size() == 1 ? "" : "s") +
                " (vulkan:0.." + std::to_string(devices.size() - 1) + "; `mambacpp devices` lists them)");
  const auto* mamba1 = dynamic_cast<const Mamba1Model*>(&model);
  if (mamba1 == nullptr)
    throw Error("the Vulkan backend runs Mamba-1 checkpoints only so far; run this one with --device cpu");
  vulkan::ContextOptions options;
  options.device_index = spec.index;
  return std::make_unique<VulkanMamba1>(*mamba1, options);
}

}  // namespace mb

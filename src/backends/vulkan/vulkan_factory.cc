// SPDX-License-Identifier: MIT
// make_vulkan_backend of a build with the Vulkan backend.
#include <string>

#include "backends/vulkan/vulkan_backend.h"
#include "backends/vulkan_factory.h"
#include "core/error.h"

namespace mb {

std::shared_ptr<const Backend> make_vulkan_backend(int index) {
  const std::string name = "vulkan:" + std::to_string(index);
  std::string why_none;
  const std::vector<vulkan::DeviceInfo> devices = vulkan::list_devices(&why_none);
  if (devices.empty()) throw Error("device '" + name + "': no Vulkan device (" + why_none + ")");
  if (index < 0 || index >= static_cast<int>(devices.size()))
    throw Error("device '" + name + "' is out of range: this machine has " + std::to_string(devices.size()) +
                " Vulkan device" + (devices.size() == 1 ? "" : "s") + " (vulkan:0.." +
                std::to_string(devices.size() - 1) + "; `mambacpp devices` lists them)");
  vulkan::ContextOptions options;
  options.device_index = index;
  return std::make_shared<vulkan::VulkanBackend>(options);
}

}  // namespace mb

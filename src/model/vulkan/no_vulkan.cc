// make_device_executor of a build without the Vulkan backend (MB_VULKAN=OFF, or AUTO without
// libvulkan-dev and glslc): every device but the CPU is an error that says how to get one.
#include "core/error.h"
#include "model/device.h"

namespace mb {

std::unique_ptr<DeviceExecutor> make_device_executor(const Model&, const DeviceSpec& spec) {
  throw Error("device '" + spec.text() +
              "' needs the Vulkan backend, which this build does not have (rebuild with -DMB_VULKAN=ON; "
              "it needs libvulkan-dev and glslc)");
}

}  // namespace mb

// SPDX-License-Identifier: MIT
// make_vulkan_backend of a build without the Vulkan backend (MB_VULKAN=OFF, or AUTO without
// libvulkan-dev and glslc): every Vulkan device is an error that says how to get one.
#include "backends/vulkan_factory.h"
#include "core/error.h"

namespace mb {

std::shared_ptr<const Backend> make_vulkan_backend(int index) {
  throw Error("device 'vulkan:" + std::to_string(index) +
              "' needs the Vulkan backend, which this build does not have (rebuild with -DMB_VULKAN=ON; "
              "it needs libvulkan-dev and glslc)");
}

}  // namespace mb

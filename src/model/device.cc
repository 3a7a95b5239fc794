// SPDX-License-Identifier: MIT
#include "model/device.h"

#include <charconv>

#include "backends/cpu/cpu_backend.h"
#include "backends/vulkan_factory.h"
#include "core/error.h"

namespace mb {

std::string DeviceSpec::text() const {
  return kind == DeviceKind::Cpu ? "cpu" : "vulkan:" + std::to_string(index);
}

DeviceSpec parse_device(const std::string& text) {
  if (text == "cpu") return {};
  const std::string vulkan = "vulkan";
  if (text.compare(0, vulkan.size(), vulkan) == 0) {
    if (text.size() == vulkan.size()) return {DeviceKind::Vulkan, 0};
    if (text[vulkan.size()] == ':') {
      const char* first = text.data() + vulkan.size() + 1;
      const char* last = text.data() + text.size();
      int index = -1;
      const auto [end, error] = std::from_chars(first, last, index);
      if (first != last && error == std::errc() && end == last && index >= 0)
        return {DeviceKind::Vulkan, index};
    }
  }
  throw Error("unknown device '" + text +
              "': expected cpu, vulkan or vulkan:N (`mambacpp devices` lists them)");
}

std::shared_ptr<const Backend> make_backend(const DeviceSpec& spec) {
  if (spec.kind == DeviceKind::Cpu) return std::make_shared<CpuBackend>();
  return make_vulkan_backend(spec.index);
}

}  // namespace mb

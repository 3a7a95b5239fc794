// SPDX-License-Identifier: MIT
#include <cstdio>
#include <string>

#include "commands.h"
#include "core/threading.h"
#if defined(MB_HAVE_VULKAN)
#include "backends/vulkan/vulkan_context.h"
#endif

namespace mb::cli {

void add_devices(CLI::App& app) {
  CLI::App* cmd = app.add_subcommand("devices", "List the compute devices: the CPU and every Vulkan device");
  cmd->callback([] {
    std::printf("CPU: instruction set %s, %d threads\n", isa_name(best_isa()), default_thread_count());
#if defined(MB_HAVE_VULKAN)
    std::string why_none;
    const auto devices = vulkan::list_devices(&why_none);
    if (devices.empty()) {
      std::printf("Vulkan: no device found (%s)\n", why_none.c_str());
      return;
    }
    for (const vulkan::DeviceInfo& d : devices) {
      std::printf("Vulkan device %d: %s\n", d.index, d.name.c_str());
      std::printf("  type %s, driver %s, Vulkan %s\n", d.type.c_str(), d.driver.c_str(),
                  vulkan::api_version_text(d.api_version).c_str());
      std::printf(
          "  device-local memory %.1f GiB, subgroup size %u (shuffles %s), shared memory %u KiB, float64 "
          "%s\n",
          static_cast<double>(d.device_local_bytes) / (1024.0 * 1024.0 * 1024.0), d.subgroup_size,
          d.subgroup_shuffle ? "yes" : "no", d.max_shared_memory_bytes / 1024, d.float64 ? "yes" : "no");
    }
#else
    std::printf("Vulkan: not built into this binary (configure with -DMB_VULKAN=ON)\n");
#endif
  });
}

}  // namespace mb::cli

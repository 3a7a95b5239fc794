// SPDX-License-Identifier: MIT
// Where a model runs: the CPU (the default) or a compute device such as a Vulkan GPU, each a
// Backend (backends/backend.h) that the model's blocks run their ops on.
//
// A model loaded for a device uploads its weights there from the packed host matrices, which
// are then dropped (unless LoadOptions::keep_host_weights), so the host does not hold a second
// copy of a model that runs on the device. Sequence states the device advances stay there until
// the caller downloads them. Without the Vulkan backend in the build, asking for a Vulkan device
// is an mb::Error saying so.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

namespace mb {

class Backend;

enum class DeviceKind { Cpu, Vulkan };

struct DeviceSpec {
  DeviceKind kind = DeviceKind::Cpu;
  int index = 0;             // among the backend's devices (`mambacpp devices` lists them)
  std::string text() const;  // "cpu", "vulkan:0"
};

// "cpu", "vulkan" (device 0) or "vulkan:N"; throws mb::Error naming the text otherwise.
DeviceSpec parse_device(const std::string& text);

// Device time of one phase of the last forward call (summed over its dispatches and rounds).
struct DevicePhaseTime {
  std::string phase;
  double milliseconds = 0.0;
  int64_t dispatches = 0;
};

// The backend of `spec`; throws mb::Error for a build without it or a device index out of range.
std::shared_ptr<const Backend> make_backend(const DeviceSpec& spec);

}  // namespace mb

// Where a model runs: the CPU (the default) or a compute device such as a Vulkan GPU.
//
// A model loaded for a device gains a DeviceExecutor: the architecture's forward pass recorded
// for that device, with the weights uploaded once at load from the packed host matrices, which
// are then dropped (unless LoadOptions::keep_host_weights), so the host does not hold a second
// copy of a model that runs on the device. Model::forward validates the batch as
// always and then hands it to the executor. Sequence states the executor advances stay on the
// device (SequenceState::device) until the caller asks for their values.
//
// The backend itself (src/backends/vulkan) knows nothing of models; the executors live under
// src/model/vulkan and are built only with the Vulkan backend. Without it, asking for a Vulkan
// device is an mb::Error saying so.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace mb {

class Model;
struct ForwardOptions;
struct SequenceInput;
struct Workspace;

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

// A sequence's state held by a device. Its layout is the host layout of SequenceState::values,
// so downloading it is a plain copy.
class DeviceState {
 public:
  virtual ~DeviceState() = default;
  // Writes the state into `values` (state_floats() of them).
  virtual void download(std::span<float> values) const = 0;
};

// A device's per-caller scratch, kept in Workspace::device between calls.
class DeviceWorkspace {
 public:
  virtual ~DeviceWorkspace() = default;
};

class DeviceExecutor {
 public:
  virtual ~DeviceExecutor() = default;
  // "vulkan:0 (llvmpipe ...)".
  virtual std::string description() const = 0;
  // Runs a validated batch (Model::forward has checked it); `totals[i]` is sequence i's number
  // of new positions.
  virtual void forward(std::span<const SequenceInput> batch, std::span<const int64_t> totals,
                       const ForwardOptions& options, Workspace& workspace,
                       std::vector<std::vector<float>>& outputs) const = 0;
  // Device time per phase of the last forward call through `workspace` (empty where the
  // device has no timestamps).
  virtual std::vector<DevicePhaseTime> last_timings(const Workspace& workspace) const = 0;
};

// The executor of `model` on `spec`'s device; throws mb::Error for a build without the backend,
// a device index out of range, an architecture or weight dtype the device cannot run.
std::unique_ptr<DeviceExecutor> make_device_executor(const Model& model, const DeviceSpec& spec);

}  // namespace mb

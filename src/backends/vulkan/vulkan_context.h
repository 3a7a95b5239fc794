// SPDX-License-Identifier: MIT
// A Vulkan compute device, explicitly owned: instance, physical and logical device, one compute
// queue, a command pool and the cache of compute pipelines. Nothing here is global; every buffer,
// command sequence and op takes the Context it runs on.
//
// Failures (no loader or driver, no device, out of device memory, a lost device, a shader that
// does not finish) throw mb::Error naming the device and the call; nothing aborts. After a lost
// device every further submission throws.
#pragma once

#include <vulkan/vulkan.h>

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace mb::vulkan {

class Buffer;

// Which SPIR-V variant implements mb_fma (see shaders/mb_math.glsl).
enum class FmaMode {
  Auto,      // the device's fma() when a probe shows it is fused, else the emulation (if doubles exist)
  Native,    // always the device's fma(), fused or not
  Emulated,  // always the emulation from double precision (needs shaderFloat64)
};

// MB_VULKAN_VALIDATION=1 in the environment asks for the Khronos validation layer.
bool validation_requested_by_environment();
// MB_VULKAN_SUBGROUPS=0 in the environment turns the shaders' subgroup shuffles off (the
// shared-memory exchanges instead), so `bench --device vulkan` can time both.
bool subgroups_allowed_by_environment();

struct ContextOptions {
  int device_index = 0;  // into list_devices()
  bool validation = validation_requested_by_environment();
  FmaMode fma = FmaMode::Auto;
  // False behaves as a device without shaderStorageBufferArrayDynamicIndexing: the batched
  // conv and scan then take one dispatch per sequence (for tests of that fallback).
  bool buffer_arrays = true;
  // False behaves as a device without subgroup shuffles: the Mamba-2/3 scans and the reductions
  // of the gated norms then pass values through shared memory (for tests of that fallback).
  bool subgroup_ops = subgroups_allowed_by_environment();
};

struct DeviceInfo {
  int index = 0;
  std::string name;
  std::string type;    // "discrete GPU", "integrated GPU", "virtual GPU", "CPU", "other"
  std::string driver;  // driver name and version
  uint32_t api_version = 0;
  uint64_t device_local_bytes = 0;  // the sum of the device-local memory heaps
  uint32_t subgroup_size = 0;
  uint32_t max_shared_memory_bytes = 0;
  uint64_t max_storage_buffer_bytes = 0;  // the largest range one storage-buffer binding may span
  bool float64 = false;                   // shaderFloat64, needed by the emulated fma
  bool timestamps = false;                // the compute queue can write timestamps
  // shaderStorageBufferArrayDynamicIndexing: shaders may pick a buffer of an array by a
  // workgroup-uniform index, which lets one dispatch reach every sequence's state.
  bool buffer_array_indexing = false;
  // Subgroup shuffles (VK_SUBGROUP_FEATURE_SHUFFLE_BIT and _RELATIVE_BIT) in compute shaders,
  // which the scans' hand-offs and the sixteen-lane reductions use when present.
  bool subgroup_shuffle = false;
};

// Every Vulkan device, in the loader's order. Never throws: with no loader, no driver or no device
// it returns an empty list and, when `why_none` is given, a sentence saying why.
std::vector<DeviceInfo> list_devices(std::string* why_none = nullptr);

std::string api_version_text(uint32_t version);  // "1.3.230"

// A compute pipeline of one embedded shader with its specialization constants.
struct KernelSpec {
  std::string shader;     // name of an embedded shader (spirv_registry.h)
  uint32_t bindings = 0;  // storage buffers at bindings 0..bindings-1 of set 0
  uint32_t push_constant_bytes = 0;
  std::vector<uint32_t> specialization;  // values of constant_id 0, 1, ...
  // Descriptors in the last binding: above 1 it is an array of that many storage buffers.
  uint32_t array_size = 1;
  // Storage-buffer descriptors one dispatch of the kernel binds.
  uint32_t descriptors() const { return bindings - 1 + array_size; }
};

struct Pipeline {
  VkDescriptorSetLayout set_layout = VK_NULL_HANDLE;
  VkPipelineLayout layout = VK_NULL_HANDLE;
  VkPipeline pipeline = VK_NULL_HANDLE;
  uint32_t bindings = 0;
  uint32_t push_constant_bytes = 0;
};

class Context {
 public:
  explicit Context(const ContextOptions& options = {});
  ~Context();
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;

  const DeviceInfo& info() const { return info_; }
  // True when mb_fma rounds once on this device (the shaders can then give the CPU's bits).
  bool exact_fma() const { return exact_fma_; }
  bool emulated_fma() const { return emulated_fma_; }
  // True when shaders may index arrays of storage buffers (the feature is present, enabled, and
  // not turned off by ContextOptions::buffer_arrays).
  bool buffer_arrays() const { return buffer_arrays_; }
  // True when shaders may use subgroup shuffles (the device has them in compute shaders and
  // ContextOptions::subgroup_ops did not turn them off).
  bool subgroup_ops() const { return subgroup_ops_; }
  bool validation_enabled() const { return validation_enabled_; }
  // Errors the validation layer reported since the last clear (empty without validation).
  std::vector<std::string> validation_errors() const;
  void clear_validation_errors();

  // Throws mb::Error for a failed call: "Vulkan <what> failed on <device>: <result>". A lost
  // device is remembered so that later submissions fail at once.
  void check(VkResult result, const char* what);

  VkDevice device() const { return device_; }
  VkPhysicalDevice physical_device() const { return physical_device_; }
  const VkPhysicalDeviceLimits& limits() const { return limits_; }
  // A memory type among type_bits with every `required` flag, preferring one with `preferred`.
  uint32_t memory_type(uint32_t type_bits, VkMemoryPropertyFlags required, VkMemoryPropertyFlags preferred,
                       const char* purpose) const;

  // The pipeline of a kernel, created on first use and kept for the context's lifetime.
  const Pipeline& pipeline(const KernelSpec& spec);
  // A tiny buffer bound where an op's optional input is absent.
  const Buffer& placeholder_buffer() const { return *placeholder_; }

  VkCommandBuffer allocate_command_buffer();
  void free_command_buffer(VkCommandBuffer command_buffer);
  // Submits one recorded command buffer and waits for it (bounded; a hang throws).
  void submit_and_wait(VkCommandBuffer command_buffer);

 private:
  void release();
  void create_instance(bool validation);
  void select_device(int index);
  void create_device();
  void choose_fma(FmaMode mode);
  void record_validation_error(std::string message);
  static VKAPI_ATTR VkBool32 VKAPI_CALL on_debug_message(VkDebugUtilsMessageSeverityFlagBitsEXT severity,
                                                         VkDebugUtilsMessageTypeFlagsEXT types,
                                                         const VkDebugUtilsMessengerCallbackDataEXT* data,
                                                         void* user_data);

  VkInstance instance_ = VK_NULL_HANDLE;
  VkDebugUtilsMessengerEXT messenger_ = VK_NULL_HANDLE;
  VkPhysicalDevice physical_device_ = VK_NULL_HANDLE;
  VkDevice device_ = VK_NULL_HANDLE;
  VkQueue queue_ = VK_NULL_HANDLE;
  uint32_t queue_family_ = 0;
  VkCommandPool command_pool_ = VK_NULL_HANDLE;
  VkFence fence_ = VK_NULL_HANDLE;
  VkPhysicalDeviceLimits limits_{};
  VkPhysicalDeviceMemoryProperties memory_{};
  DeviceInfo info_;
  bool validation_enabled_ = false;
  bool exact_fma_ = false;
  bool emulated_fma_ = false;
  bool buffer_arrays_ = false;
  bool subgroup_ops_ = false;
  bool lost_ = false;
  std::unique_ptr<Buffer> placeholder_;
  std::map<std::string, Pipeline> pipelines_;  // by shader name and specialization values
  mutable std::mutex validation_mutex_;
  std::vector<std::string> validation_errors_;
};

}  // namespace mb::vulkan

// SPDX-License-Identifier: MIT
#include "backends/vulkan/vulkan_context.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <random>

#if defined(__SANITIZE_ADDRESS__)
#include <dlfcn.h>
#include <link.h>
#endif

#include "backends/vulkan/spirv_registry.h"
#include "backends/vulkan/vulkan_buffer.h"
#include "backends/vulkan/vulkan_commands.h"
#include "core/error.h"

namespace mb::vulkan {
namespace {

constexpr const char* kValidationLayer = "VK_LAYER_KHRONOS_validation";
// A shader that has not finished after this long is taken as hung (the CPU device in CI runs
// every test shader in well under a second).
constexpr uint64_t kFenceTimeoutNs = 120ull * 1000 * 1000 * 1000;

const char* result_name(VkResult result) {
  switch (result) {
    case VK_SUCCESS:
      return "VK_SUCCESS";
    case VK_NOT_READY:
      return "VK_NOT_READY";
    case VK_TIMEOUT:
      return "VK_TIMEOUT (the device did not finish in time)";
    case VK_ERROR_OUT_OF_HOST_MEMORY:
      return "VK_ERROR_OUT_OF_HOST_MEMORY (out of host memory)";
    case VK_ERROR_OUT_OF_DEVICE_MEMORY:
      return "VK_ERROR_OUT_OF_DEVICE_MEMORY (out of device memory)";
    case VK_ERROR_INITIALIZATION_FAILED:
      return "VK_ERROR_INITIALIZATION_FAILED";
    case VK_ERROR_DEVICE_LOST:
      return "VK_ERROR_DEVICE_LOST (the device was lost)";
    case VK_ERROR_LAYER_NOT_PRESENT:
      return "VK_ERROR_LAYER_NOT_PRESENT";
    case VK_ERROR_EXTENSION_NOT_PRESENT:
      return "VK_ERROR_EXTENSION_NOT_PRESENT";
    case VK_ERROR_FEATURE_NOT_PRESENT:
      return "VK_ERROR_FEATURE_NOT_PRESENT";
    case VK_ERROR_INCOMPATIBLE_DRIVER:
      return "VK_ERROR_INCOMPATIBLE_DRIVER (no usable Vulkan driver)";
    case VK_ERROR_TOO_MANY_OBJECTS:
      return "VK_ERROR_TOO_MANY_OBJECTS";
    case VK_ERROR_FRAGMENTED_POOL:
      return "VK_ERROR_FRAGMENTED_POOL";
    case VK_ERROR_OUT_OF_POOL_MEMORY:
      return "VK_ERROR_OUT_OF_POOL_MEMORY";
    default:
      return "an unknown VkResult";
  }
}

std::string device_type_name(VkPhysicalDeviceType type) {
  switch (type) {
    case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU:
      return "discrete GPU";
    case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU:
      return "integrated GPU";
    case VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU:
      return "virtual GPU";
    case VK_PHYSICAL_DEVICE_TYPE_CPU:
      return "CPU";
    default:
      return "other";
  }
}

bool layer_available(const char* name) {
  uint32_t count = 0;
  if (vkEnumerateInstanceLayerProperties(&count, nullptr) != VK_SUCCESS) return false;
  std::vector<VkLayerProperties> layers(count);
  if (vkEnumerateInstanceLayerProperties(&count, layers.data()) != VK_SUCCESS) return false;
  for (const auto& layer : layers)
    if (std::strcmp(layer.layerName, name) == 0) return true;
  return false;
}

// The first queue family that runs compute work.
bool find_compute_queue(VkPhysicalDevice device, uint32_t& family, bool& timestamps) {
  uint32_t count = 0;
  vkGetPhysicalDeviceQueueFamilyProperties(device, &count, nullptr);
  std::vector<VkQueueFamilyProperties> families(count);
  vkGetPhysicalDeviceQueueFamilyProperties(device, &count, families.data());
  for (uint32_t i = 0; i < count; ++i) {
    if (families[i].queueFlags & VK_QUEUE_COMPUTE_BIT) {
      family = i;
      timestamps = families[i].timestampValidBits > 0;
      return true;
    }
  }
  return false;
}

DeviceInfo describe(VkPhysicalDevice device, int index) {
  VkPhysicalDeviceProperties properties;
  vkGetPhysicalDeviceProperties(device, &properties);
  DeviceInfo info;
  info.index = index;
  info.name = properties.deviceName;
  info.type = device_type_name(properties.deviceType);
  info.api_version = properties.apiVersion;
  info.max_shared_memory_bytes = properties.limits.maxComputeSharedMemorySize;
  info.max_storage_buffer_bytes = properties.limits.maxStorageBufferRange;

  // Subgroup size (core 1.1) and, on 1.2 devices, the driver's own name and version string.
  VkPhysicalDeviceDriverProperties driver{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_DRIVER_PROPERTIES};
  VkPhysicalDeviceSubgroupProperties subgroup{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_PROPERTIES};
  const bool has_driver_properties = properties.apiVersion >= VK_API_VERSION_1_2;
  if (has_driver_properties) subgroup.pNext = &driver;
  VkPhysicalDeviceProperties2 properties2{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2};
  properties2.pNext = &subgroup;
  vkGetPhysicalDeviceProperties2(device, &properties2);
  info.subgroup_size = subgroup.subgroupSize;
  const VkSubgroupFeatureFlags shuffles =
      VK_SUBGROUP_FEATURE_SHUFFLE_BIT | VK_SUBGROUP_FEATURE_SHUFFLE_RELATIVE_BIT;
  info.subgroup_shuffle = (subgroup.supportedStages & VK_SHADER_STAGE_COMPUTE_BIT) != 0 &&
                          (subgroup.supportedOperations & shuffles) == shuffles;
  if (has_driver_properties)
    info.driver = std::string(driver.driverName) + " " + driver.driverInfo;
  else
    info.driver = "driver version " + std::to_string(properties.driverVersion);

  VkPhysicalDeviceMemoryProperties memory;
  vkGetPhysicalDeviceMemoryProperties(device, &memory);
  for (uint32_t i = 0; i < memory.memoryHeapCount; ++i)
    if (memory.memoryHeaps[i].flags & VK_MEMORY_HEAP_DEVICE_LOCAL_BIT)
      info.device_local_bytes += memory.memoryHeaps[i].size;

  VkPhysicalDeviceFeatures features;
  vkGetPhysicalDeviceFeatures(device, &features);
  info.float64 = features.shaderFloat64 == VK_TRUE;
  info.buffer_array_indexing = features.shaderStorageBufferArrayDynamicIndexing == VK_TRUE;
  uint32_t family = 0;
  find_compute_queue(device, family, info.timestamps);
  return info;
}

VkInstance create_plain_instance(VkResult& result) {
  VkApplicationInfo app{VK_STRUCTURE_TYPE_APPLICATION_INFO};
  app.pApplicationName = "mambacpp";
  app.apiVersion = VK_API_VERSION_1_1;
  VkInstanceCreateInfo create{VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO};
  create.pApplicationInfo = &app;
  VkInstance instance = VK_NULL_HANDLE;
  result = vkCreateInstance(&create, nullptr, &instance);
  return result == VK_SUCCESS ? instance : VK_NULL_HANDLE;
}

}  // namespace

bool subgroups_allowed_by_environment() {
  const char* value = std::getenv("MB_VULKAN_SUBGROUPS");
  return value == nullptr || std::strcmp(value, "0") != 0;
}

bool validation_requested_by_environment() {
  const char* value = std::getenv("MB_VULKAN_VALIDATION");
  return value != nullptr && std::strcmp(value, "1") == 0;
}

std::string api_version_text(uint32_t version) {
  return std::to_string(VK_API_VERSION_MAJOR(version)) + "." + std::to_string(VK_API_VERSION_MINOR(version)) +
         "." + std::to_string(VK_API_VERSION_PATCH(version));
}

namespace {

#if defined(__SANITIZE_ADDRESS__)
// In an AddressSanitizer build, keeps every Vulkan driver the loader opened loaded until the
// process exits. Mesa's lavapipe allocates static data while it enumerates devices on some
// CPUs; when the loader unloads the driver at vkDestroyInstance that memory becomes unreachable,
// and LeakSanitizer would report it at exit as the engine's leak. Kept loaded, it stays
// reachable, and any leak reported is a real one. Release builds unload drivers as usual.
void keep_drivers_loaded() {
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void*) {
        const char* name = info->dlpi_name;
        if (name != nullptr && std::strstr(name, "libvulkan_") != nullptr)
          dlopen(name, RTLD_NOW | RTLD_NOLOAD | RTLD_NODELETE);
        return 0;
      },
      nullptr);
}
#else
void keep_drivers_loaded() {}
#endif

}  // namespace

std::vector<DeviceInfo> list_devices(std::string* why_none) {
  std::vector<DeviceInfo> devices;
  VkResult result;
  VkInstance instance = create_plain_instance(result);
  if (instance == VK_NULL_HANDLE) {
    if (why_none) *why_none = std::string("no Vulkan instance could be created: ") + result_name(result);
    return devices;
  }
  uint32_t count = 0;
  vkEnumeratePhysicalDevices(instance, &count, nullptr);
  keep_drivers_loaded();
  std::vector<VkPhysicalDevice> handles(count);
  if (count > 0) vkEnumeratePhysicalDevices(instance, &count, handles.data());
  for (uint32_t i = 0; i < count; ++i) devices.push_back(describe(handles[i], static_cast<int>(i)));
  vkDestroyInstance(instance, nullptr);
  if (devices.empty() && why_none) *why_none = "the Vulkan loader found no device";
  return devices;
}

const ShaderSpirv& find_shader(std::string_view name) {
  for (const ShaderSpirv& shader : embedded_shaders())
    if (name == shader.name) return shader;
  throw Error("no Vulkan shader named '" + std::string(name) + "' is embedded in this build");
}

Context::Context(const ContextOptions& options) {
  try {
    create_instance(options.validation);
    select_device(options.device_index);
    buffer_arrays_ = options.buffer_arrays && info_.buffer_array_indexing;
    subgroup_ops_ = options.subgroup_ops && info_.subgroup_shuffle;
    create_device();
    placeholder_ = std::make_unique<Buffer>(*this, 16);
    choose_fma(options.fma);
  } catch (...) {
    release();  // a constructor that throws runs no destructor
    throw;
  }
}

Context::~Context() {
  release();
}

void Context::release() {
  if (device_ != VK_NULL_HANDLE) {
    vkDeviceWaitIdle(device_);
    placeholder_.reset();
    for (auto& [key, p] : pipelines_) {
      vkDestroyPipeline(device_, p.pipeline, nullptr);
      vkDestroyPipelineLayout(device_, p.layout, nullptr);
      vkDestroyDescriptorSetLayout(device_, p.set_layout, nullptr);
    }
    pipelines_.clear();
    if (fence_ != VK_NULL_HANDLE) vkDestroyFence(device_, fence_, nullptr);
    if (command_pool_ != VK_NULL_HANDLE) vkDestroyCommandPool(device_, command_pool_, nullptr);
    vkDestroyDevice(device_, nullptr);
    device_ = VK_NULL_HANDLE;
  }
  if (messenger_ != VK_NULL_HANDLE) {
    auto destroy = reinterpret_cast<PFN_vkDestroyDebugUtilsMessengerEXT>(
        vkGetInstanceProcAddr(instance_, "vkDestroyDebugUtilsMessengerEXT"));
    if (destroy) destroy(instance_, messenger_, nullptr);
    messenger_ = VK_NULL_HANDLE;
  }
  if (instance_ != VK_NULL_HANDLE) {
    vkDestroyInstance(instance_, nullptr);
    instance_ = VK_NULL_HANDLE;
  }
}

void Context::check(VkResult result, const char* what) {
  if (result == VK_SUCCESS) return;
  if (result == VK_ERROR_DEVICE_LOST) lost_ = true;
  const std::string device = info_.name.empty() ? "" : " on " + info_.name;
  throw Error(std::string("Vulkan ") + what + " failed" + device + ": " + result_name(result));
}

VKAPI_ATTR VkBool32 VKAPI_CALL Context::on_debug_message(VkDebugUtilsMessageSeverityFlagBitsEXT severity,
                                                         VkDebugUtilsMessageTypeFlagsEXT,
                                                         const VkDebugUtilsMessengerCallbackDataEXT* data,
                                                         void* user_data) {
  if (severity >= VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT && user_data != nullptr)
    static_cast<Context*>(user_data)->record_validation_error(data && data->pMessage ? data->pMessage : "?");
  return VK_FALSE;  // never abort the call that triggered the message
}

void Context::record_validation_error(std::string message) {
  std::lock_guard lock(validation_mutex_);
  validation_errors_.push_back(std::move(message));
}

std::vector<std::string> Context::validation_errors() const {
  std::lock_guard lock(validation_mutex_);
  return validation_errors_;
}

void Context::clear_validation_errors() {
  std::lock_guard lock(validation_mutex_);
  validation_errors_.clear();
}

void Context::create_instance(bool validation) {
  validation_enabled_ = validation && layer_available(kValidationLayer);
  VkApplicationInfo app{VK_STRUCTURE_TYPE_APPLICATION_INFO};
  app.pApplicationName = "mambacpp";
  app.apiVersion = VK_API_VERSION_1_1;
  VkInstanceCreateInfo create{VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO};
  create.pApplicationInfo = &app;
  // The messenger passed at creation also reports errors of vkCreateInstance/vkDestroyInstance.
  VkDebugUtilsMessengerCreateInfoEXT messenger{VK_STRUCTURE_TYPE_DEBUG_UTILS_MESSENGER_CREATE_INFO_EXT};
  messenger.messageSeverity =
      VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT | VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT;
  messenger.messageType = VK_DEBUG_UTILS_MESSAGE_TYPE_GENERAL_BIT_EXT |
                          VK_DEBUG_UTILS_MESSAGE_TYPE_VALIDATION_BIT_EXT |
                          VK_DEBUG_UTILS_MESSAGE_TYPE_PERFORMANCE_BIT_EXT;
  messenger.pfnUserCallback = &Context::on_debug_message;
  messenger.pUserData = this;
  const char* layers[] = {kValidationLayer};
  const char* extensions[] = {VK_EXT_DEBUG_UTILS_EXTENSION_NAME};
  if (validation_enabled_) {
    create.enabledLayerCount = 1;
    create.ppEnabledLayerNames = layers;
    create.enabledExtensionCount = 1;
    create.ppEnabledExtensionNames = extensions;
    create.pNext = &messenger;
  }
  check(vkCreateInstance(&create, nullptr, &instance_), "instance creation (is a Vulkan driver installed?)");
  if (validation_enabled_) {
    auto create_messenger = reinterpret_cast<PFN_vkCreateDebugUtilsMessengerEXT>(
        vkGetInstanceProcAddr(instance_, "vkCreateDebugUtilsMessengerEXT"));
    if (create_messenger == nullptr)
      throw Error("Vulkan: the validation layer lacks vkCreateDebugUtilsMessengerEXT");
    check(create_messenger(instance_, &messenger, nullptr, &messenger_), "debug messenger creation");
  }
}

void Context::select_device(int index) {
  uint32_t count = 0;
  check(vkEnumeratePhysicalDevices(instance_, &count, nullptr), "device enumeration");
  keep_drivers_loaded();
  if (count == 0) throw Error("no Vulkan device found");
  if (index < 0 || static_cast<uint32_t>(index) >= count)
    throw Error("Vulkan device " + std::to_string(index) + " does not exist (there are " +
                std::to_string(count) + ", numbered from 0; see `mambacpp devices`)");
  std::vector<VkPhysicalDevice> devices(count);
  check(vkEnumeratePhysicalDevices(instance_, &count, devices.data()), "device enumeration");
  physical_device_ = devices[index];
  info_ = describe(physical_device_, index);
  bool timestamps = false;
  if (!find_compute_queue(physical_device_, queue_family_, timestamps))
    throw Error("Vulkan device " + info_.name + " has no compute queue");
  VkPhysicalDeviceProperties properties;
  vkGetPhysicalDeviceProperties(physical_device_, &properties);
  limits_ = properties.limits;
  vkGetPhysicalDeviceMemoryProperties(physical_device_, &memory_);
}

void Context::create_device() {
  const float priority = 1.0f;
  VkDeviceQueueCreateInfo queue{VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO};
  queue.queueFamilyIndex = queue_family_;
  queue.queueCount = 1;
  queue.pQueuePriorities = &priority;
  VkPhysicalDeviceFeatures features{};
  features.shaderFloat64 = info_.float64 ? VK_TRUE : VK_FALSE;  // for the emulated fma
  features.shaderStorageBufferArrayDynamicIndexing = buffer_arrays_ ? VK_TRUE : VK_FALSE;
  VkDeviceCreateInfo create{VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO};
  create.queueCreateInfoCount = 1;
  create.pQueueCreateInfos = &queue;
  create.pEnabledFeatures = &features;
  check(vkCreateDevice(physical_device_, &create, nullptr, &device_), "device creation");
  vkGetDeviceQueue(device_, queue_family_, 0, &queue_);
  VkCommandPoolCreateInfo pool{VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO};
  pool.flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT;
  pool.queueFamilyIndex = queue_family_;
  check(vkCreateCommandPool(device_, &pool, nullptr, &command_pool_), "command pool creation");
  VkFenceCreateInfo fence{VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
  check(vkCreateFence(device_, &fence, nullptr, &fence_), "fence creation");
}

// Runs the device's own fma() (the native variant of math_probe) on products whose fused and
// unfused results differ, and picks the variant of every shader from the answer.
void Context::choose_fma(FmaMode mode) {
  if (mode == FmaMode::Emulated && !info_.float64)
    throw Error("Vulkan device " + info_.name + " lacks shaderFloat64, which the emulated fma needs");
  // a * b + c with c = -round(a * b): a fused fma returns the product's rounding error, which is
  // nonzero for these inputs; a multiply and an add return 0.
  constexpr int kProbes = 64;
  std::vector<float> a(kProbes), b(kProbes), c(kProbes), fused(kProbes);
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> dist(1.0f, 2.0f);
  for (int i = 0; i < kProbes; ++i) {
    a[i] = dist(rng);
    b[i] = dist(rng);
    c[i] = -(a[i] * b[i]);
    fused[i] = std::fma(a[i], b[i], c[i]);
  }
  Buffer in_a = Buffer::from_floats(*this, a), in_b = Buffer::from_floats(*this, b),
         in_c = Buffer::from_floats(*this, c), out(*this, kProbes * sizeof(float));
  const KernelSpec spec{"math_probe", 4, 8, {}};
  emulated_fma_ = false;  // the probe measures the native variant
  const struct { uint32_t count, function; } push{kProbes, 0};
  CommandSequence probe(*this, 1);
  probe.begin();
  const Buffer* buffers[] = {&in_a, &in_b, &in_c, &out};
  probe.dispatch(spec, buffers, &push, sizeof push, {1, 1, 1}, "fma probe");
  probe.end();
  probe.run();
  const bool native_fused = std::memcmp(out.to_floats().data(), fused.data(), sizeof(float) * kProbes) == 0;
  switch (mode) {
    case FmaMode::Native:
      emulated_fma_ = false;
      exact_fma_ = native_fused;
      break;
    case FmaMode::Emulated:
      emulated_fma_ = true;
      exact_fma_ = true;
      break;
    case FmaMode::Auto:
      emulated_fma_ = !native_fused && info_.float64;
      exact_fma_ = native_fused || info_.float64;
      break;
  }
}

uint32_t Context::memory_type(uint32_t type_bits, VkMemoryPropertyFlags required,
                              VkMemoryPropertyFlags preferred, const char* purpose) const {
  int fallback = -1;
  for (uint32_t i = 0; i < memory_.memoryTypeCount; ++i) {
    if (!(type_bits & (1u << i))) continue;
    const VkMemoryPropertyFlags flags = memory_.memoryTypes[i].propertyFlags;
    if ((flags & required) != required) continue;
    if ((flags & preferred) == preferred) return i;
    if (fallback < 0) fallback = static_cast<int>(i);
  }
  if (fallback < 0)
    throw Error(std::string("Vulkan device ") + info_.name + " has no memory type for " + purpose);
  return static_cast<uint32_t>(fallback);
}

const Pipeline& Context::pipeline(const KernelSpec& spec) {
  // The key names the SPIR-V variant too: the fma probe builds a native pipeline before the
  // context settles on its variant.
  std::string key = spec.shader + (emulated_fma_ ? "/emulated_fma" : "/native");
  for (uint32_t value : spec.specialization) {
    key += '/';
    key += std::to_string(value);
  }
  key += "/array" + std::to_string(spec.array_size);
  if (auto found = pipelines_.find(key); found != pipelines_.end()) return found->second;

  const ShaderSpirv& shader = find_shader(spec.shader);
  const std::span<const uint32_t> code = emulated_fma_ ? shader.emulated_fma : shader.native;
  if (spec.bindings == 0 || spec.array_size == 0)
    throw Error("Vulkan kernel " + spec.shader + " declares no storage buffers");
  const uint32_t most =
      std::min(limits_.maxPerStageDescriptorStorageBuffers, limits_.maxDescriptorSetStorageBuffers);
  if (spec.descriptors() > most)
    throw Error("Vulkan device " + info_.name + " binds at most " + std::to_string(most) +
                " storage buffers per shader; " + spec.shader + " needs " +
                std::to_string(spec.descriptors()));

  Pipeline p;
  p.bindings = spec.bindings;
  p.push_constant_bytes = spec.push_constant_bytes;
  std::vector<VkDescriptorSetLayoutBinding> bindings(spec.bindings);
  for (uint32_t i = 0; i < spec.bindings; ++i) {
    bindings[i].binding = i;
    bindings[i].descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
    bindings[i].descriptorCount = i + 1 == spec.bindings ? spec.array_size : 1;
    bindings[i].stageFlags = VK_SHADER_STAGE_COMPUTE_BIT;
  }
  VkDescriptorSetLayoutCreateInfo set_layout{VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO};
  set_layout.bindingCount = spec.bindings;
  set_layout.pBindings = bindings.data();
  VkShaderModule module = VK_NULL_HANDLE;
  try {
    check(vkCreateDescriptorSetLayout(device_, &set_layout, nullptr, &p.set_layout),
          "descriptor set layout creation");
    VkPushConstantRange range{VK_SHADER_STAGE_COMPUTE_BIT, 0, spec.push_constant_bytes};
    VkPipelineLayoutCreateInfo layout{VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO};
    layout.setLayoutCount = 1;
    layout.pSetLayouts = &p.set_layout;
    layout.pushConstantRangeCount = spec.push_constant_bytes > 0 ? 1 : 0;
    layout.pPushConstantRanges = &range;
    check(vkCreatePipelineLayout(device_, &layout, nullptr, &p.layout), "pipeline layout creation");

    VkShaderModuleCreateInfo module_info{VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO};
    module_info.codeSize = code.size_bytes();
    module_info.pCode = code.data();
    check(vkCreateShaderModule(device_, &module_info, nullptr, &module), "shader module creation");

    std::vector<VkSpecializationMapEntry> entries(spec.specialization.size());
    for (uint32_t i = 0; i < entries.size(); ++i)
      entries[i] = {i, static_cast<uint32_t>(i * sizeof(uint32_t)), sizeof(uint32_t)};
    VkSpecializationInfo specialization{static_cast<uint32_t>(entries.size()), entries.data(),
                                        spec.specialization.size() * sizeof(uint32_t),
                                        spec.specialization.data()};
    VkComputePipelineCreateInfo create{VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO};
    create.stage.sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO;
    create.stage.stage = VK_SHADER_STAGE_COMPUTE_BIT;
    create.stage.module = module;
    create.stage.pName = "main";
    create.stage.pSpecializationInfo = entries.empty() ? nullptr : &specialization;
    create.layout = p.layout;
    check(vkCreateComputePipelines(device_, VK_NULL_HANDLE, 1, &create, nullptr, &p.pipeline),
          "compute pipeline creation");
  } catch (...) {
    if (module != VK_NULL_HANDLE) vkDestroyShaderModule(device_, module, nullptr);
    if (p.layout != VK_NULL_HANDLE) vkDestroyPipelineLayout(device_, p.layout, nullptr);
    if (p.set_layout != VK_NULL_HANDLE) vkDestroyDescriptorSetLayout(device_, p.set_layout, nullptr);
    throw;
  }
  vkDestroyShaderModule(device_, module, nullptr);  // the pipeline keeps what it needs
  return pipelines_.emplace(key, p).first->second;
}

VkCommandBuffer Context::allocate_command_buffer() {
  VkCommandBufferAllocateInfo allocate{VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO};
  allocate.commandPool = command_pool_;
  allocate.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
  allocate.commandBufferCount = 1;
  VkCommandBuffer command_buffer = VK_NULL_HANDLE;
  check(vkAllocateCommandBuffers(device_, &allocate, &command_buffer), "command buffer allocation");
  return command_buffer;
}

void Context::free_command_buffer(VkCommandBuffer command_buffer) {
  if (command_buffer != VK_NULL_HANDLE) vkFreeCommandBuffers(device_, command_pool_, 1, &command_buffer);
}

void Context::submit_and_wait(VkCommandBuffer command_buffer) {
  if (lost_) throw Error("Vulkan device " + info_.name + " was lost earlier; create a new context");
  VkSubmitInfo submit{VK_STRUCTURE_TYPE_SUBMIT_INFO};
  submit.commandBufferCount = 1;
  submit.pCommandBuffers = &command_buffer;
  check(vkResetFences(device_, 1, &fence_), "fence reset");
  check(vkQueueSubmit(queue_, 1, &submit, fence_), "queue submission");
  const VkResult waited = vkWaitForFences(device_, 1, &fence_, VK_TRUE, kFenceTimeoutNs);
  if (waited == VK_TIMEOUT) {
    lost_ = true;  // the queue still holds the work; nothing may be submitted after it
    throw Error("Vulkan device " + info_.name + " did not finish a submission within 120 s");
  }
  check(waited, "waiting for the device");
}

}  // namespace mb::vulkan

// SPDX-License-Identifier: MIT
#include "backends/vulkan/vulkan_buffer.h"

#include <cstring>
#include <string>
#include <utility>

#include "backends/vulkan/vulkan_context.h"
#include "core/error.h"

namespace mb::vulkan {
namespace {

// A buffer and its own memory allocation. The backend allocates few, large buffers (weights,
// activations, state), so one allocation per buffer stays far below any allocation-count limit.
void create_buffer(Context& context, uint64_t bytes, VkBufferUsageFlags usage, VkMemoryPropertyFlags required,
                   VkMemoryPropertyFlags preferred, const char* purpose, VkBuffer& buffer,
                   VkDeviceMemory& memory) {
  VkBufferCreateInfo create{VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO};
  create.size = bytes;
  create.usage = usage;
  create.sharingMode = VK_SHARING_MODE_EXCLUSIVE;
  context.check(vkCreateBuffer(context.device(), &create, nullptr, &buffer), "buffer creation");
  VkMemoryRequirements requirements;
  vkGetBufferMemoryRequirements(context.device(), buffer, &requirements);
  VkMemoryAllocateInfo allocate{VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO};
  allocate.allocationSize = requirements.size;
  try {
    allocate.memoryTypeIndex = context.memory_type(requirements.memoryTypeBits, required, preferred, purpose);
    const VkResult result = vkAllocateMemory(context.device(), &allocate, nullptr, &memory);
    if (result == VK_ERROR_OUT_OF_DEVICE_MEMORY || result == VK_ERROR_OUT_OF_HOST_MEMORY)
      throw Error("Vulkan device " + context.info().name + " is out of memory allocating " +
                  std::to_string(bytes) + " bytes for " + purpose);
    context.check(result, "memory allocation");
    context.check(vkBindBufferMemory(context.device(), buffer, memory, 0), "binding buffer memory");
  } catch (...) {
    if (memory != VK_NULL_HANDLE) vkFreeMemory(context.device(), memory, nullptr);
    vkDestroyBuffer(context.device(), buffer, nullptr);
    buffer = VK_NULL_HANDLE;
    memory = VK_NULL_HANDLE;
    throw;
  }
}

// A host-visible buffer for one transfer, mapped while it lives.
class Staging {
 public:
  Staging(Context& context, uint64_t bytes, bool readback) : context_(context) {
    // Readback prefers cached memory (host reads of uncached memory are slow).
    const VkMemoryPropertyFlags preferred =
        VK_MEMORY_PROPERTY_HOST_COHERENT_BIT | (readback ? VK_MEMORY_PROPERTY_HOST_CACHED_BIT : 0);
    create_buffer(context, bytes,
                  readback ? VK_BUFFER_USAGE_TRANSFER_DST_BIT : VK_BUFFER_USAGE_TRANSFER_SRC_BIT,
                  VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT, preferred, "a staging buffer", buffer_, memory_);
    const VkResult mapped = vkMapMemory(context.device(), memory_, 0, VK_WHOLE_SIZE, 0, &data_);
    if (mapped != VK_SUCCESS) {
      release();
      context.check(mapped, "mapping a staging buffer");
    }
  }
  ~Staging() { release(); }
  Staging(const Staging&) = delete;
  Staging& operator=(const Staging&) = delete;

  VkBuffer buffer() const { return buffer_; }
  void* data() const { return data_; }
  // Makes device writes visible to the host when the memory is not coherent.
  void invalidate() {
    VkMappedMemoryRange range{VK_STRUCTURE_TYPE_MAPPED_MEMORY_RANGE};
    range.memory = memory_;
    range.size = VK_WHOLE_SIZE;
    context_.check(vkInvalidateMappedMemoryRanges(context_.device(), 1, &range),
                   "invalidating a staging buffer");
  }
  void flush() {
    VkMappedMemoryRange range{VK_STRUCTURE_TYPE_MAPPED_MEMORY_RANGE};
    range.memory = memory_;
    range.size = VK_WHOLE_SIZE;
    context_.check(vkFlushMappedMemoryRanges(context_.device(), 1, &range), "flushing a staging buffer");
  }

 private:
  void release() {
    if (data_ != nullptr) vkUnmapMemory(context_.device(), memory_);
    if (memory_ != VK_NULL_HANDLE) vkFreeMemory(context_.device(), memory_, nullptr);
    if (buffer_ != VK_NULL_HANDLE) vkDestroyBuffer(context_.device(), buffer_, nullptr);
    data_ = nullptr;
    memory_ = VK_NULL_HANDLE;
    buffer_ = VK_NULL_HANDLE;
  }

  Context& context_;
  VkBuffer buffer_ = VK_NULL_HANDLE;
  VkDeviceMemory memory_ = VK_NULL_HANDLE;
  void* data_ = nullptr;
};

// Records one buffer-to-buffer copy between barriers that order it after earlier shader work
// and before later shader work, then submits it and waits.
void copy_and_wait(Context& context, VkBuffer from, uint64_t from_offset, VkBuffer to, uint64_t to_offset,
                   uint64_t bytes) {
  VkCommandBuffer command_buffer = context.allocate_command_buffer();
  try {
    VkCommandBufferBeginInfo begin{VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
    begin.flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT;
    context.check(vkBeginCommandBuffer(command_buffer, &begin), "beginning a transfer");
    VkMemoryBarrier before{VK_STRUCTURE_TYPE_MEMORY_BARRIER};
    before.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_HOST_WRITE_BIT;
    before.dstAccessMask = VK_ACCESS_TRANSFER_READ_BIT | VK_ACCESS_TRANSFER_WRITE_BIT;
    vkCmdPipelineBarrier(command_buffer, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_HOST_BIT,
                         VK_PIPELINE_STAGE_TRANSFER_BIT, 0, 1, &before, 0, nullptr, 0, nullptr);
    const VkBufferCopy region{from_offset, to_offset, bytes};
    vkCmdCopyBuffer(command_buffer, from, to, 1, &region);
    VkMemoryBarrier after{VK_STRUCTURE_TYPE_MEMORY_BARRIER};
    after.srcAccessMask = VK_ACCESS_TRANSFER_WRITE_BIT;
    after.dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_HOST_READ_BIT;
    vkCmdPipelineBarrier(command_buffer, VK_PIPELINE_STAGE_TRANSFER_BIT,
                         VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_HOST_BIT, 0, 1, &after, 0,
                         nullptr, 0, nullptr);
    context.check(vkEndCommandBuffer(command_buffer), "ending a transfer");
    context.submit_and_wait(command_buffer);
  } catch (...) {
    context.free_command_buffer(command_buffer);
    throw;
  }
  context.free_command_buffer(command_buffer);
}

}  // namespace

Buffer::Buffer(Context& context, uint64_t bytes, Memory memory) : context_(&context), bytes_(bytes) {
  if (bytes > context.info().max_storage_buffer_bytes)
    throw Error("a Vulkan buffer of " + std::to_string(bytes) + " bytes exceeds the " +
                std::to_string(context.info().max_storage_buffer_bytes) +
                " bytes one storage binding may span on " + context.info().name);
  // Vulkan has no empty buffers; an empty one is given one word nobody reads.
  const uint64_t size = bytes > 0 ? (bytes + 3) / 4 * 4 : 4;
  const VkBufferUsageFlags usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT |
                                   VK_BUFFER_USAGE_TRANSFER_DST_BIT;
  if (memory == Memory::DeviceLocal) {
    create_buffer(context, size, usage, VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT, 0, "a device buffer", buffer_,
                  memory_);
    return;
  }
  // Cached memory makes host reads of results fast; coherent memory makes flushes free.
  create_buffer(context, size, usage, VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT,
                VK_MEMORY_PROPERTY_HOST_COHERENT_BIT | VK_MEMORY_PROPERTY_HOST_CACHED_BIT,
                "a host-visible buffer", buffer_, memory_);
  const VkResult result = vkMapMemory(context.device(), memory_, 0, VK_WHOLE_SIZE, 0, &mapped_);
  if (result != VK_SUCCESS) {
    release();
    context.check(result, "mapping a host-visible buffer");
  }
}

void Buffer::flush() const {
  if (mapped_ == nullptr) return;
  VkMappedMemoryRange range{VK_STRUCTURE_TYPE_MAPPED_MEMORY_RANGE};
  range.memory = memory_;
  range.size = VK_WHOLE_SIZE;
  context_->check(vkFlushMappedMemoryRanges(context_->device(), 1, &range), "flushing a host-visible buffer");
}

void Buffer::invalidate() const {
  if (mapped_ == nullptr) return;
  VkMappedMemoryRange range{VK_STRUCTURE_TYPE_MAPPED_MEMORY_RANGE};
  range.memory = memory_;
  range.size = VK_WHOLE_SIZE;
  context_->check(vkInvalidateMappedMemoryRanges(context_->device(), 1, &range),
                  "invalidating a host-visible buffer");
}

Buffer::~Buffer() {
  release();
}

Buffer::Buffer(Buffer&& other) noexcept
    : context_(other.context_),
      buffer_(std::exchange(other.buffer_, VK_NULL_HANDLE)),
      memory_(std::exchange(other.memory_, VK_NULL_HANDLE)),
      bytes_(std::exchange(other.bytes_, 0)),
      mapped_(std::exchange(other.mapped_, nullptr)) {}

Buffer& Buffer::operator=(Buffer&& other) noexcept {
  if (this != &other) {
    release();
    context_ = other.context_;
    buffer_ = std::exchange(other.buffer_, VK_NULL_HANDLE);
    memory_ = std::exchange(other.memory_, VK_NULL_HANDLE);
    bytes_ = std::exchange(other.bytes_, 0);
    mapped_ = std::exchange(other.mapped_, nullptr);
  }
  return *this;
}

void Buffer::release() {
  if (mapped_ != nullptr) vkUnmapMemory(context_->device(), memory_);
  mapped_ = nullptr;
  if (buffer_ != VK_NULL_HANDLE) vkDestroyBuffer(context_->device(), buffer_, nullptr);
  if (memory_ != VK_NULL_HANDLE) vkFreeMemory(context_->device(), memory_, nullptr);
  buffer_ = VK_NULL_HANDLE;
  memory_ = VK_NULL_HANDLE;
}

void Buffer::upload(const void* data, uint64_t bytes, uint64_t offset) {
  if (offset > bytes_ || bytes > bytes_ - offset)
    throw Error("Vulkan upload of " + std::to_string(bytes) + " bytes at " + std::to_string(offset) +
                " overruns a buffer of " + std::to_string(bytes_));
  if (bytes == 0) return;
  if (mapped_ != nullptr) {
    std::memcpy(static_cast<uint8_t*>(mapped_) + offset, data, bytes);
    flush();
    return;
  }
  Staging staging(*context_, bytes, false);
  std::memcpy(staging.data(), data, bytes);
  staging.flush();
  copy_and_wait(*context_, staging.buffer(), 0, buffer_, offset, bytes);
}

void Buffer::download(void* data, uint64_t bytes, uint64_t offset) const {
  if (offset > bytes_ || bytes > bytes_ - offset)
    throw Error("Vulkan download of " + std::to_string(bytes) + " bytes at " + std::to_string(offset) +
                " overruns a buffer of " + std::to_string(bytes_));
  if (bytes == 0) return;
  if (mapped_ != nullptr) {
    invalidate();
    std::memcpy(data, static_cast<const uint8_t*>(mapped_) + offset, bytes);
    return;
  }
  Staging staging(*context_, bytes, true);
  copy_and_wait(*context_, buffer_, offset, staging.buffer(), 0, bytes);
  staging.invalidate();
  std::memcpy(data, staging.data(), bytes);
}

void Buffer::copy_from(const Buffer& from, uint64_t from_offset, uint64_t to_offset, uint64_t bytes) {
  if (from_offset > from.bytes_ || bytes > from.bytes_ - from_offset || to_offset > bytes_ ||
      bytes > bytes_ - to_offset)
    throw Error("Vulkan copy of " + std::to_string(bytes) + " bytes overruns a buffer");
  if (bytes == 0) return;
  copy_and_wait(*context_, from.buffer_, from_offset, buffer_, to_offset, bytes);
}

Buffer Buffer::from_floats(Context& context, const std::vector<float>& values) {
  Buffer buffer(context, values.size() * sizeof(float));
  buffer.upload(values.data(), values.size() * sizeof(float));
  return buffer;
}

std::vector<float> Buffer::to_floats() const {
  std::vector<float> values(bytes_ / sizeof(float));
  download(values.data(), values.size() * sizeof(float));
  return values;
}

}  // namespace mb::vulkan

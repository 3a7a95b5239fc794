// SPDX-License-Identifier: MIT
// Device-local storage buffers, filled through host-visible staging buffers and read back the
// same way. Transfers are synchronous: each one is submitted and waited for, so a buffer's
// contents on the host side of the call are final when it returns.
#pragma once

#include <vulkan/vulkan.h>

#include <cstdint>
#include <vector>

namespace mb::vulkan {

class Context;

// Where a buffer's memory lives. Device-local memory is what shaders read fastest; host-visible
// memory is mapped into the process, so small per-call inputs and outputs (a decode step's
// embedding rows and logits) move by memcpy instead of a staging copy and a submission each.
enum class Memory { DeviceLocal, HostVisible };

class Buffer {
 public:
  // A storage buffer of `bytes` bytes (its contents undefined until written). Throws mb::Error
  // when the device is out of memory or the size exceeds what one storage binding may span on
  // this device.
  Buffer(Context& context, uint64_t bytes, Memory memory = Memory::DeviceLocal);
  ~Buffer();
  Buffer(Buffer&& other) noexcept;
  Buffer& operator=(Buffer&& other) noexcept;
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;

  VkBuffer handle() const { return buffer_; }
  uint64_t bytes() const { return bytes_; }
  // The mapped memory of a host-visible buffer (null for a device-local one). Host writes must
  // be followed by flush() before a submission reads them, and device writes preceded by
  // invalidate() before the host reads them (both are no-ops on coherent memory).
  void* mapped() const { return mapped_; }
  void flush() const;
  void invalidate() const;

  // Host -> device and device -> host copies of `bytes` bytes at byte `offset` of the buffer.
  void upload(const void* data, uint64_t bytes, uint64_t offset = 0);
  void download(void* data, uint64_t bytes, uint64_t offset = 0) const;

  // Copies `bytes` bytes of `from` at byte `from_offset` to byte `to_offset` of this buffer, on the
  // device (no host round trip).
  void copy_from(const Buffer& from, uint64_t from_offset, uint64_t to_offset, uint64_t bytes);

  // A buffer holding these floats, and all floats of a buffer.
  static Buffer from_floats(Context& context, const std::vector<float>& values);
  std::vector<float> to_floats() const;

 private:
  void release();

  Context* context_ = nullptr;
  VkBuffer buffer_ = VK_NULL_HANDLE;
  VkDeviceMemory memory_ = VK_NULL_HANDLE;
  uint64_t bytes_ = 0;
  void* mapped_ = nullptr;
};

}  // namespace mb::vulkan

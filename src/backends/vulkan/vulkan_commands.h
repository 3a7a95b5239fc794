// A command buffer of compute dispatches, recorded once and run any number of times.
//
// A decode step is the same sequence of dispatches every token, only the buffers' contents
// change; recording it once and replaying it saves the per-dispatch recording cost (the Vulkan
// analogue of a replayed CUDA graph). Each dispatch gets its own descriptor set, filled at
// record time, so the buffers it binds must outlive the recording. A full memory barrier
// separates consecutive dispatches: every op may read what the previous ones wrote.
//
// Small per-dispatch tables that do not fit in push constants (the rows and states of the
// sequences a batched op covers) are staged into a host-visible parameter buffer owned by the
// sequence: written at record time, read by every replay.
//
// When the queue supports timestamps, every run measures each dispatch's device time.
#pragma once

#include <vulkan/vulkan.h>

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "backends/vulkan/vulkan_context.h"

namespace mb::vulkan {

class Buffer;

struct DispatchTime {
  std::string label;
  double milliseconds = 0.0;
};

class CommandSequence {
 public:
  // Room for up to `max_dispatches` dispatches per recording.
  explicit CommandSequence(Context& context, uint32_t max_dispatches = 256);
  ~CommandSequence();
  CommandSequence(const CommandSequence&) = delete;
  CommandSequence& operator=(const CommandSequence&) = delete;

  // Starts a new recording (dropping the previous one).
  void begin();
  // Records one dispatch of `kernel` over `groups` workgroups; `buffers` bind to 0, 1, ..., the
  // last `kernel.array_size` of them forming the last binding's array; `push_constants` holds
  // exactly the kernel's push-constant bytes. Group counts above the device limit throw.
  void dispatch(const KernelSpec& kernel, std::span<const Buffer* const> buffers, const void* push_constants,
                uint32_t push_constant_bytes, const uint32_t (&groups)[3], std::string label);
  // Records a copy of `bytes` bytes between two buffers, ordered after the earlier dispatches and
  // before the later ones like a dispatch (and timed like one).
  void copy(const Buffer& from, uint64_t from_offset, const Buffer& to, uint64_t to_offset, uint64_t bytes,
            std::string label);
  // Copies `words` into the parameter buffer and returns the word offset they start at; valid
  // until the next begin(). Bind parameter_buffer() to read them.
  uint32_t stage(std::span<const uint32_t> words);
  const Buffer& parameter_buffer();
  void end();
  // Submits the recording and waits for it; may be called again and again.
  void run();

  Context& context() const { return context_; }
  uint32_t dispatch_count() const { return static_cast<uint32_t>(labels_.size()); }
  // Device time of each dispatch in the last run (empty without timestamp support).
  std::vector<DispatchTime> last_timings() const;

 private:
  Context& context_;
  uint32_t max_dispatches_;
  VkCommandBuffer command_buffer_ = VK_NULL_HANDLE;
  VkDescriptorPool descriptor_pool_ = VK_NULL_HANDLE;
  VkQueryPool query_pool_ = VK_NULL_HANDLE;
  std::unique_ptr<Buffer> parameters_;  // host-visible, made on first use
  uint32_t parameter_words_ = 0;        // staged so far in this recording
  std::vector<std::string> labels_;
  bool recording_ = false;
  bool recorded_ = false;
  bool ran_ = false;
};

}  // namespace mb::vulkan

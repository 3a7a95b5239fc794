// SPDX-License-Identifier: MIT
// A command buffer of compute dispatches, recorded once and run any number of times.
//
// A decode step is the same sequence of dispatches every token, only the buffers' contents
// change; recording it once and replaying it saves the per-dispatch recording cost (the Vulkan
// analogue of a replayed CUDA graph). Each dispatch gets its own descriptor set, filled at
// record time, so the buffers it binds must outlive the recording. A full memory barrier
// separates consecutive dispatches: every op may read what the previous ones wrote.
//
// Small per-dispatch tables that do not fit in push constants (the rows and states of the
// sequences a batched op covers) are staged into host-visible parameter buffers owned by the
// sequence: written at record time, read by every replay.
//
// A recording holds any number of dispatches: descriptor sets, timestamp queries and parameter
// words come from pools of a fixed size, and a recording that fills one takes another, so the
// caller need not know a round's dispatch count before recording it.
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
  // Pools are made `pool_dispatches` dispatches at a time (the first one here).
  explicit CommandSequence(Context& context, uint32_t pool_dispatches = 256);
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
  // Copies `words` into a parameter buffer; valid until the next begin(). Bind `buffer` to read
  // them from word `at`.
  struct Staged {
    const Buffer* buffer;
    uint32_t at;
  };
  Staged stage(std::span<const uint32_t> words);
  // A device buffer of at least `bytes` bytes for intermediate values between the dispatches of
  // one op (the chunked scans' products), valid until the next begin(). Ops run one after another,
  // so every op of a recording gets the same buffer (grown when an op needs more; a buffer a
  // recorded dispatch binds is kept until the recording is dropped).
  const Buffer& scratch(uint64_t bytes);
  void end();
  // Submits the recording and waits for it; may be called again and again.
  void run();

  Context& context() const { return context_; }
  uint32_t dispatch_count() const { return static_cast<uint32_t>(labels_.size()); }
  // Device time of each dispatch in the last run (empty without timestamp support).
  std::vector<DispatchTime> last_timings() const;

 private:
  // Opens a new pool of each kind when the current ones are full; records the new query pool's
  // reset.
  void make_room();
  void destroy();
  // The query of dispatch `index`'s start (its end is the next query).
  VkQueryPool query_pool_of(uint32_t index, uint32_t& query) const;

  Context& context_;
  uint32_t pool_dispatches_;
  VkCommandBuffer command_buffer_ = VK_NULL_HANDLE;
  std::vector<VkDescriptorPool> descriptor_pools_;       // pool_dispatches_ sets each
  std::vector<VkQueryPool> query_pools_;                 // two queries per dispatch; none without timestamps
  uint32_t pools_in_use_ = 0;                            // descriptor (and query) pools of this recording
  std::vector<std::unique_ptr<Buffer>> parameters_;      // host-visible, made on first use
  std::vector<std::unique_ptr<Buffer>> scratch_;         // the last is the largest and current
  uint32_t parameter_buffer_ = 0, parameter_words_ = 0;  // the one being filled, and its words used
  std::vector<std::string> labels_;
  bool recording_ = false;
  bool recorded_ = false;
  bool ran_ = false;
};

}  // namespace mb::vulkan

// SPDX-License-Identifier: MIT
#include "backends/vulkan/vulkan_commands.h"

#include <algorithm>
#include <cstring>

#include "backends/vulkan/vulkan_buffer.h"
#include "core/error.h"

namespace mb::vulkan {
namespace {

// Descriptors one dispatch may bind (its plain bindings plus an array), which sizes the pool.
constexpr uint32_t kMaxDescriptorsPerDispatch = 32;
// Parameter words a recording may stage per dispatch room (a 16-part table takes 32).
constexpr uint32_t kParameterWordsPerDispatch = 64;

// Every earlier write (by a shader, a copy or the host) becomes visible to every later shader
// access and copy. Ops are few and large, so one full barrier between them costs little.
void full_barrier(VkCommandBuffer command_buffer) {
  VkMemoryBarrier barrier{VK_STRUCTURE_TYPE_MEMORY_BARRIER};
  barrier.srcAccessMask =
      VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT | VK_ACCESS_HOST_WRITE_BIT;
  barrier.dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT |
                          VK_ACCESS_TRANSFER_READ_BIT | VK_ACCESS_TRANSFER_WRITE_BIT |
                          VK_ACCESS_HOST_READ_BIT;
  const VkPipelineStageFlags stages =
      VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT | VK_PIPELINE_STAGE_HOST_BIT;
  vkCmdPipelineBarrier(command_buffer, stages, stages, 0, 1, &barrier, 0, nullptr, 0, nullptr);
}

}  // namespace

CommandSequence::CommandSequence(Context& context, uint32_t pool_dispatches)
    : context_(context), pool_dispatches_(pool_dispatches > 0 ? pool_dispatches : 1) {
  try {
    command_buffer_ = context.allocate_command_buffer();
  } catch (...) {
    destroy();
    throw;
  }
}

CommandSequence::~CommandSequence() {
  destroy();
}

void CommandSequence::destroy() {
  if (command_buffer_ != VK_NULL_HANDLE) context_.free_command_buffer(command_buffer_);
  for (VkQueryPool pool : query_pools_) vkDestroyQueryPool(context_.device(), pool, nullptr);
  for (VkDescriptorPool pool : descriptor_pools_) vkDestroyDescriptorPool(context_.device(), pool, nullptr);
  command_buffer_ = VK_NULL_HANDLE;
  query_pools_.clear();
  descriptor_pools_.clear();
}

void CommandSequence::make_room() {
  if (labels_.size() < static_cast<size_t>(pools_in_use_) * pool_dispatches_) return;
  if (pools_in_use_ == descriptor_pools_.size()) {
    VkDescriptorPoolSize size{VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
                              pool_dispatches_ * kMaxDescriptorsPerDispatch};
    VkDescriptorPoolCreateInfo info{VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO};
    info.maxSets = pool_dispatches_;
    info.poolSizeCount = 1;
    info.pPoolSizes = &size;
    VkDescriptorPool pool = VK_NULL_HANDLE;
    context_.check(vkCreateDescriptorPool(context_.device(), &info, nullptr, &pool),
                   "descriptor pool creation");
    descriptor_pools_.push_back(pool);
    if (context_.info().timestamps) {
      VkQueryPoolCreateInfo queries{VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO};
      queries.queryType = VK_QUERY_TYPE_TIMESTAMP;
      queries.queryCount = 2 * pool_dispatches_;
      VkQueryPool query_pool = VK_NULL_HANDLE;
      context_.check(vkCreateQueryPool(context_.device(), &queries, nullptr, &query_pool),
                     "query pool creation");
      query_pools_.push_back(query_pool);
    }
  }
  // The pool was reset with the others at begin(); its queries are reset here, in the recording,
  // before the dispatches that write them.
  if (!query_pools_.empty())
    vkCmdResetQueryPool(command_buffer_, query_pools_[pools_in_use_], 0, 2 * pool_dispatches_);
  ++pools_in_use_;
}

VkQueryPool CommandSequence::query_pool_of(uint32_t index, uint32_t& query) const {
  if (query_pools_.empty()) return VK_NULL_HANDLE;
  query = 2 * (index % pool_dispatches_);
  return query_pools_[index / pool_dispatches_];
}

void CommandSequence::begin() {
  context_.check(vkResetCommandBuffer(command_buffer_, 0), "command buffer reset");
  for (VkDescriptorPool pool : descriptor_pools_)
    context_.check(vkResetDescriptorPool(context_.device(), pool, 0), "descriptor pool reset");
  labels_.clear();
  // The previous recording's dispatches are dropped: only the largest scratch buffer is kept.
  if (scratch_.size() > 1) scratch_.erase(scratch_.begin(), scratch_.end() - 1);
  pools_in_use_ = 0;
  parameter_buffer_ = 0;
  parameter_words_ = 0;
  recorded_ = false;
  ran_ = false;
  VkCommandBufferBeginInfo begin{VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
  context_.check(vkBeginCommandBuffer(command_buffer_, &begin), "beginning a recording");
  recording_ = true;
}

void CommandSequence::dispatch(const KernelSpec& kernel, std::span<const Buffer* const> buffers,
                               const void* push_constants, uint32_t push_constant_bytes,
                               const uint32_t (&groups)[3], std::string label) {
  MB_CHECK(recording_);
  MB_CHECK(buffers.size() == kernel.descriptors() && push_constant_bytes == kernel.push_constant_bytes);
  MB_CHECK(kernel.descriptors() <= kMaxDescriptorsPerDispatch);
  for (int axis = 0; axis < 3; ++axis)
    if (groups[axis] > context_.limits().maxComputeWorkGroupCount[axis])
      throw Error("Vulkan dispatch '" + label + "' needs " + std::to_string(groups[axis]) +
                  " workgroups along an axis; the device allows " +
                  std::to_string(context_.limits().maxComputeWorkGroupCount[axis]));
  const Pipeline& pipeline = context_.pipeline(kernel);
  make_room();

  VkDescriptorSetAllocateInfo allocate{VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO};
  allocate.descriptorPool = descriptor_pools_[pools_in_use_ - 1];
  allocate.descriptorSetCount = 1;
  allocate.pSetLayouts = &pipeline.set_layout;
  VkDescriptorSet set = VK_NULL_HANDLE;
  context_.check(vkAllocateDescriptorSets(context_.device(), &allocate, &set), "descriptor set allocation");
  std::vector<VkDescriptorBufferInfo> infos(buffers.size());
  for (size_t i = 0; i < buffers.size(); ++i) {
    MB_CHECK(buffers[i] != nullptr);
    infos[i] = {buffers[i]->handle(), 0, VK_WHOLE_SIZE};
  }
  // One write per binding; the last one fills its whole array from consecutive infos.
  std::vector<VkWriteDescriptorSet> writes(kernel.bindings);
  for (uint32_t i = 0; i < kernel.bindings; ++i) {
    writes[i] = {VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET};
    writes[i].dstSet = set;
    writes[i].dstBinding = i;
    writes[i].descriptorCount = i + 1 == kernel.bindings ? kernel.array_size : 1;
    writes[i].descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
    writes[i].pBufferInfo = &infos[i];
  }
  vkUpdateDescriptorSets(context_.device(), static_cast<uint32_t>(writes.size()), writes.data(), 0, nullptr);

  uint32_t query = 0;
  const VkQueryPool queries = query_pool_of(static_cast<uint32_t>(labels_.size()), query);
  full_barrier(command_buffer_);
  if (queries != VK_NULL_HANDLE)
    vkCmdWriteTimestamp(command_buffer_, VK_PIPELINE_STAGE_TOP_OF_PIPE_BIT, queries, query);
  vkCmdBindPipeline(command_buffer_, VK_PIPELINE_BIND_POINT_COMPUTE, pipeline.pipeline);
  vkCmdBindDescriptorSets(command_buffer_, VK_PIPELINE_BIND_POINT_COMPUTE, pipeline.layout, 0, 1, &set, 0,
                          nullptr);
  if (push_constant_bytes > 0)
    vkCmdPushConstants(command_buffer_, pipeline.layout, VK_SHADER_STAGE_COMPUTE_BIT, 0, push_constant_bytes,
                       push_constants);
  if (groups[0] > 0 && groups[1] > 0 && groups[2] > 0)
    vkCmdDispatch(command_buffer_, groups[0], groups[1], groups[2]);
  if (queries != VK_NULL_HANDLE)
    vkCmdWriteTimestamp(command_buffer_, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, queries, query + 1);
  labels_.push_back(std::move(label));
}

void CommandSequence::copy(const Buffer& from, uint64_t from_offset, const Buffer& to, uint64_t to_offset,
                           uint64_t bytes, std::string label) {
  MB_CHECK(recording_);
  if (from_offset > from.bytes() || bytes > from.bytes() - from_offset || to_offset > to.bytes() ||
      bytes > to.bytes() - to_offset)
    throw Error("Vulkan copy '" + label + "' of " + std::to_string(bytes) + " bytes overruns a buffer");
  make_room();
  uint32_t query = 0;
  const VkQueryPool queries = query_pool_of(static_cast<uint32_t>(labels_.size()), query);
  full_barrier(command_buffer_);
  if (queries != VK_NULL_HANDLE)
    vkCmdWriteTimestamp(command_buffer_, VK_PIPELINE_STAGE_TOP_OF_PIPE_BIT, queries, query);
  if (bytes > 0) {
    const VkBufferCopy region{from_offset, to_offset, bytes};
    vkCmdCopyBuffer(command_buffer_, from.handle(), to.handle(), 1, &region);
  }
  if (queries != VK_NULL_HANDLE)
    vkCmdWriteTimestamp(command_buffer_, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, queries, query + 1);
  labels_.push_back(std::move(label));
}

CommandSequence::Staged CommandSequence::stage(std::span<const uint32_t> words) {
  MB_CHECK(recording_);
  const uint64_t buffer_words = static_cast<uint64_t>(pool_dispatches_) * kParameterWordsPerDispatch;
  if (words.size() > buffer_words)
    throw Error("a Vulkan command sequence stages at most " + std::to_string(buffer_words) +
                " parameter words at once");
  if (parameter_buffer_ < parameters_.size() && parameter_words_ + words.size() > buffer_words) {
    ++parameter_buffer_;
    parameter_words_ = 0;
  }
  if (parameter_buffer_ == parameters_.size())
    parameters_.push_back(std::make_unique<Buffer>(context_, buffer_words * 4, Memory::HostVisible));
  const Buffer& buffer = *parameters_[parameter_buffer_];
  const uint32_t at = parameter_words_;
  std::memcpy(static_cast<uint32_t*>(buffer.mapped()) + at, words.data(), words.size_bytes());
  parameter_words_ += static_cast<uint32_t>(words.size());
  return {&buffer, at};
}

const Buffer& CommandSequence::scratch(uint64_t bytes) {
  MB_CHECK(recording_);
  if (scratch_.empty() || scratch_.back()->bytes() < bytes)
    scratch_.push_back(std::make_unique<Buffer>(context_, std::max<uint64_t>(bytes, 16)));
  return *scratch_.back();
}

void CommandSequence::end() {
  MB_CHECK(recording_);
  for (size_t i = 0; i < parameters_.size() && i <= parameter_buffer_; ++i) parameters_[i]->flush();
  full_barrier(command_buffer_);
  context_.check(vkEndCommandBuffer(command_buffer_), "ending a recording");
  recording_ = false;
  recorded_ = true;
}

void CommandSequence::run() {
  MB_CHECK(recorded_);
  context_.submit_and_wait(command_buffer_);
  ran_ = true;
}

std::vector<DispatchTime> CommandSequence::last_timings() const {
  std::vector<DispatchTime> times;
  if (query_pools_.empty() || !ran_ || labels_.empty()) return times;
  std::vector<uint64_t> stamps(2 * labels_.size());
  for (uint32_t first = 0; first < labels_.size(); first += pool_dispatches_) {
    const uint32_t count =
        std::min<uint32_t>(pool_dispatches_, static_cast<uint32_t>(labels_.size()) - first);
    const VkResult result = vkGetQueryPoolResults(
        context_.device(), query_pools_[first / pool_dispatches_], 0, 2 * count, 2 * count * sizeof(uint64_t),
        stamps.data() + 2 * first, sizeof(uint64_t), VK_QUERY_RESULT_64_BIT | VK_QUERY_RESULT_WAIT_BIT);
    if (result != VK_SUCCESS) return times;
  }
  const double ns_per_tick = context_.limits().timestampPeriod;
  for (size_t i = 0; i < labels_.size(); ++i)
    times.push_back(
        {labels_[i], static_cast<double>(stamps[2 * i + 1] - stamps[2 * i]) * ns_per_tick * 1e-6});
  return times;
}

}  // namespace mb::vulkan

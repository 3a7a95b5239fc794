// SPDX-License-Identifier: MIT
// Helpers the op recorders share (vulkan_ops.cc, vulkan_ssm_ops.cc): argument checks, push-constant
// narrowing, workgroup counts, and the grouping of a batched op's parts into dispatches.
#pragma once

#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <span>
#include <string>
#include <vector>

#include "backends/backend.h"
#include "backends/vulkan/vulkan_buffer.h"
#include "backends/vulkan/vulkan_commands.h"
#include "core/error.h"

namespace mb::vulkan {

uint32_t ceil_div(uint64_t a, uint64_t b);
// Push constants are 32-bit: every count, stride and offset must fit.
uint32_t u32(int64_t value, const char* op, const char* name);
// Throws unless a [rows, cols] view with row stride ld from element `offset` lies inside the
// buffer (elements of `element_bytes`). An empty view needs nothing.
void require_view(const Buffer* buffer, uint64_t offset, int64_t rows, int64_t cols, int64_t ld,
                  uint64_t element_bytes, const char* op, const char* name);
// Spreads `count` workgroups over x and y so neither exceeds the per-axis limit.
void spread_groups(CommandSequence& sequence, uint64_t count, uint32_t (&groups)[3]);
// Parts per dispatch of a batched kernel: kMaxGpuParts where the device indexes buffer arrays
// and binds that many buffers, else 1 (the single-part variant).
uint32_t parts_per_dispatch(const Context& context, uint32_t plain_bindings);
// The buffers of one dispatch: the plain bindings, then the array of the group's states padded
// with the placeholder to the kernel's array size.
std::vector<const Buffer*> part_buffers(const Context& context, std::initializer_list<const Buffer*> plain,
                                        std::span<const Part> group, uint32_t array_size);

// Checks the parts of a batched op and records `dispatch(first, count, staged)` for each group
// of up to `per_dispatch` parts, their [first row, rows] pairs staged at staged.at of
// staged.buffer.
template <typename Dispatch>
void for_part_groups(CommandSequence& sequence, std::span<const Part> parts, uint32_t per_dispatch,
                     const char* op, Dispatch&& dispatch) {
  for (size_t i = 0; i < parts.size(); ++i) {
    if (parts[i].state == nullptr)
      throw Error(std::string(op) + ": part " + std::to_string(i) + " has no state");
    if (parts[i].first_row < 0 || parts[i].rows < 0)
      throw Error(std::string(op) + ": part " + std::to_string(i) + " has a negative row range");
    for (size_t j = 0; j < i; ++j)
      if (parts[j].state == parts[i].state)
        throw Error(std::string(op) + ": parts " + std::to_string(j) + " and " + std::to_string(i) +
                    " update the same state");
  }
  for (size_t first = 0; first < parts.size(); first += per_dispatch) {
    const size_t count = std::min<size_t>(per_dispatch, parts.size() - first);
    std::vector<uint32_t> rows(2 * count);
    for (size_t i = 0; i < count; ++i) {
      rows[2 * i] = u32(parts[first + i].first_row, op, "first_row");
      rows[2 * i + 1] = u32(parts[first + i].rows, op, "rows");
    }
    dispatch(first, count, sequence.stage(rows));
  }
}

}  // namespace mb::vulkan

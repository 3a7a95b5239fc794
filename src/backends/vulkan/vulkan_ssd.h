// SPDX-License-Identifier: MIT
// The building blocks the Mamba-2 and Mamba-3 recorders share (vulkan_mamba2_ops.cc,
// vulkan_mamba3_ops.cc): the workgroup shape of the sequential scans, the shader variants, and the
// chunked SSD form's plan, products and state passing (shaders/ssd_layout.glsl).
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "backends/backend.h"
#include "backends/vulkan/vulkan_buffer.h"
#include "backends/vulkan/vulkan_commands.h"

namespace mb::vulkan {

// Workgroup sizes are multiples of this, the largest common subgroup size, so that subgroups tile
// the workgroup (mb_lanes.glsl).
inline constexpr uint32_t kWorkgroupQuantum = 64;

// The shape of a sequential scan's workgroup (mamba2_scan.glsl, mamba3_scan.glsl): one head of
// `headdim` channels, each channel's N states over `lanes` invocations of `regs` registers, with
// `block` positions staged at a time.
struct ScanShape {
  uint32_t invocations = 0, lanes = 0, regs = 0, block = 0;
};

// The widest shape the device runs: lanes holding at most 16 states each (up to 16 lanes), fewer
// lanes where the workgroup would exceed the device's invocations, and staging blocks of 8
// positions (at least lanes - 1), fewer where `shared_floats` exceeds its shared memory. Throws
// when not even one lane per channel fits.
ScanShape fit_scan(const Context& context, int64_t headdim, int64_t d_state,
                   const std::function<uint64_t(const ScanShape&)>& shared_floats, const char* op);

// The shader variant: `name`, then "_parts" for the batched one, then "_subgroup" where the
// device's subgroup shuffles are used.
std::string shader_variant(const Context& context, std::string name, bool parts);

// The chunks of a round's parts: each part's rows cut into chunks of `chunk` positions from its
// first row, in windows of whole chunks (Mamba-3's continued windows: the CPU's time blocks of
// mamba3_kernels.inc, max(64, chunk) rounded up to whole chunks), and the two tables the shaders
// read: per chunk its part, first row, length and flags; per part its first chunk, chunk count,
// first row and row count.
struct SsdPlan {
  int64_t chunk = 0, states = 0, headdim = 0;
  uint32_t chunks = 0;  // over all parts
  std::vector<uint32_t> tables;
  uint64_t batch_floats = 0;  // ssd_layout.glsl's block per (chunk, head)
  uint32_t head_count = 0;    // heads per pass over the scratch
  uint64_t extra_floats = 0;  // scratch after the batches (Mamba-3's phases)

  uint64_t scratch_bytes() const { return (uint64_t{head_count} * chunks * batch_floats + extra_floats) * 4; }
  uint64_t extra_at() const { return uint64_t{head_count} * chunks * batch_floats; }
};

// `extra_floats` of scratch after the batches, for every pass.
SsdPlan plan_ssd(const Context& context, std::span<const Part> parts, int64_t chunk, int64_t n_heads,
                 int64_t d_state, int64_t headdim, uint64_t extra_floats, const char* op);

// One of ssd_gemm.comp's products (mode 0 M, 1 Intra, 2 dH, 3 Mamba-2's y, 4 Mamba-3's Ypre) for the
// heads [head_begin, head_begin + heads).
struct SsdOutput {
  const Buffer* y = nullptr;  // mode 3: the op's y rows
  uint64_t y_offset = 0;
  int64_t ldy = 0;
  const Buffer* d_skip = nullptr;  // mode 3: D per channel, or null
  uint64_t d_offset = 0;
};
void record_ssd_gemm(CommandSequence& sequence, const SsdPlan& plan, uint32_t mode, const Buffer& scratch,
                     CommandSequence::Staged tables, uint32_t head_begin, uint32_t heads,
                     const SsdOutput& out, const char* op);

// ssd_pass.glsl over every part (groups of kMaxGpuParts with buffer arrays), heads
// [head_begin, head_begin + heads). With `kv`, Mamba-3's fold (when `fold`) and k and v states.
struct SsdPassKv {
  bool fold = false;
  uint64_t k_offset = 0, v_offset = 0;
};
void record_ssd_pass(CommandSequence& sequence, const SsdPlan& plan, const Buffer& scratch,
                     CommandSequence::Staged tables, std::span<const Part> parts, uint32_t head_begin,
                     uint32_t heads, uint64_t ssm_offset, const SsdPassKv* kv, const char* op);

}  // namespace mb::vulkan

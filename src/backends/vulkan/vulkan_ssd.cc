// SPDX-License-Identifier: MIT
#include "backends/vulkan/vulkan_ssd.h"

#include <algorithm>
#include <string>

#include "backends/vulkan/vulkan_op_util.h"
#include "backends/vulkan/vulkan_ops.h"
#include "core/error.h"

namespace mb::vulkan {
namespace {

uint32_t round_up(uint32_t value, uint32_t quantum) {
  return (value + quantum - 1) / quantum * quantum;
}

uint32_t next_power_of_two(uint32_t value) {
  uint32_t p = 1;
  while (p < value) p *= 2;
  return p;
}

constexpr uint32_t kWindowStart = 1, kWindowEnd = 2;  // ssd_layout.glsl's chunk flags
constexpr int64_t kWindowRows = 64;                   // the CPU's time block (kTimeBlock)

}  // namespace

ScanShape fit_scan(const Context& context, int64_t headdim, int64_t d_state,
                   const std::function<uint64_t(const ScanShape&)>& shared_floats, const char* op) {
  const VkPhysicalDeviceLimits& limits = context.limits();
  const uint32_t most = std::min(limits.maxComputeWorkGroupInvocations, limits.maxComputeWorkGroupSize[0]);
  const uint32_t N = static_cast<uint32_t>(d_state), P = static_cast<uint32_t>(headdim);
  for (uint32_t lanes = std::min<uint32_t>(16, next_power_of_two((N + 15) / 16)); lanes >= 1; lanes /= 2) {
    ScanShape shape;
    shape.lanes = lanes;
    shape.regs = (N + lanes - 1) / lanes;
    shape.invocations = round_up(P * lanes, kWorkgroupQuantum);
    if (shape.invocations > most) continue;
    const uint32_t least_block = std::max<uint32_t>(1, lanes - 1);
    for (shape.block = std::max<uint32_t>(8, least_block); shape.block >= least_block; --shape.block)
      if (4 * shared_floats(shape) <= limits.maxComputeSharedMemorySize) return shape;
  }
  throw Error(std::string(op) + ": a head of " + std::to_string(headdim) + " channels with d_state " +
              std::to_string(d_state) + " needs more shared memory or invocations than " +
              context.info().name + " offers");
}

std::string shader_variant(const Context& context, std::string name, bool parts) {
  if (parts) name += "_parts";
  if (context.subgroup_ops()) name += "_subgroup";
  return name;
}

// ---- the chunked SSD form (ssd_layout.glsl) ---------------------------------------------------

SsdPlan plan_ssd(const Context& context, std::span<const Part> parts, int64_t chunk, int64_t n_heads,
                 int64_t d_state, int64_t headdim, uint64_t extra_floats, const char* op) {
  if (chunk < 1) throw Error(std::string(op) + ": SSD chunks of " + std::to_string(chunk) + " positions");
  SsdPlan plan;
  plan.chunk = chunk;
  plan.states = d_state;
  plan.headdim = headdim;
  const int64_t window = (std::max(kWindowRows, chunk) + chunk - 1) / chunk * chunk;
  std::vector<uint32_t> chunk_table, part_table;
  for (size_t i = 0; i < parts.size(); ++i) {
    const Part& part = parts[i];
    part_table.insert(part_table.end(),
                      {plan.chunks, 0, u32(part.first_row, op, "first_row"), u32(part.rows, op, "rows")});
    for (int64_t c0 = 0; c0 < part.rows; c0 += chunk) {
      const int64_t length = std::min(chunk, part.rows - c0);
      const uint32_t flags = (c0 % window == 0 ? kWindowStart : 0) |
                             ((c0 + length) % window == 0 || c0 + length == part.rows ? kWindowEnd : 0);
      chunk_table.insert(chunk_table.end(), {static_cast<uint32_t>(i), u32(part.first_row + c0, op, "row"),
                                             static_cast<uint32_t>(length), flags});
      ++plan.chunks;
      ++part_table[4 * i + 1];
    }
  }
  plan.tables = chunk_table;
  plan.tables.insert(plan.tables.end(), part_table.begin(), part_table.end());
  const uint64_t L = static_cast<uint64_t>(chunk), N = static_cast<uint64_t>(d_state),
                 P = static_cast<uint64_t>(headdim);
  plan.batch_floats = 4 * L * N + 3 * L * P + L * L + 2 * N * P + 8 * L + 4;
  // As many heads per pass as one scratch binding spans and the workgroup counts allow.
  const VkPhysicalDeviceLimits& limits = context.limits();
  plan.extra_floats = extra_floats;
  const uint64_t per_head = std::max<uint64_t>(plan.chunks, 1) * plan.batch_floats * 4;
  const uint64_t room = context.info().max_storage_buffer_bytes;
  const uint64_t by_bytes = room > extra_floats * 4 ? (room - extra_floats * 4) / per_head : 0;
  const uint64_t by_groups = limits.maxComputeWorkGroupCount[2] / std::max<uint32_t>(plan.chunks, 1);
  plan.head_count = static_cast<uint32_t>(std::min<uint64_t>({by_bytes, by_groups, uint64_t(n_heads)}));
  if (plan.head_count == 0 || plan.chunks > limits.maxComputeWorkGroupCount[1])
    throw Error(std::string(op) + ": the chunked form of " + std::to_string(plan.chunks) + " chunks of " +
                std::to_string(chunk) + " positions exceeds " + context.info().name +
                "'s buffers; run the round in smaller pieces (a smaller --chunk)");
  return plan;
}

void record_ssd_gemm(CommandSequence& sequence, const SsdPlan& plan, uint32_t mode, const Buffer& scratch,
                     CommandSequence::Staged tables, uint32_t head_begin, uint32_t heads,
                     const SsdOutput& out, const char* op) {
  const char* names[] = {"M", "intra", "dH", "y", "y"};
  const uint32_t L = static_cast<uint32_t>(plan.chunk), N = static_cast<uint32_t>(plan.states),
                 P = static_cast<uint32_t>(plan.headdim);
  const uint32_t rows = mode == 2 ? N : L, columns = mode == 0 ? L : P;
  const struct {
    uint32_t chunk, states, headdim, head_begin, head_count, chunks_at, ldy, y_offset, d_offset,
        d_per_channel;
  } push{L,
         N,
         P,
         head_begin,
         heads,
         tables.at,
         u32(out.ldy, op, "ldy"),
         u32(static_cast<int64_t>(out.y_offset), op, "y_offset"),
         u32(static_cast<int64_t>(out.d_offset), op, "d_offset"),
         out.d_skip != nullptr};
  const KernelSpec kernel{"ssd_gemm", 4, sizeof push, {mode}};
  const Buffer* placeholder = &sequence.context().placeholder_buffer();
  const Buffer* buffers[] = {&scratch, tables.buffer, out.y != nullptr ? out.y : placeholder,
                             out.d_skip != nullptr ? out.d_skip : placeholder};
  const uint32_t groups[3] = {ceil_div(columns, 16), ceil_div(rows, 16), plan.chunks * heads};
  sequence.dispatch(kernel, buffers, &push, sizeof push, groups,
                    std::string("ssd ") + names[mode] + " " + std::to_string(plan.chunks) + " chunks x" +
                        std::to_string(heads) + " heads");
}

void record_ssd_pass(CommandSequence& sequence, const SsdPlan& plan, const Buffer& scratch,
                     CommandSequence::Staged tables, std::span<const Part> parts, uint32_t head_begin,
                     uint32_t heads, uint64_t ssm_offset, const SsdPassKv* kv, const char* op) {
  Context& context = sequence.context();
  const uint32_t per_dispatch = parts_per_dispatch(context, 2);
  const KernelSpec kernel{
      per_dispatch > 1 ? "ssd_pass_parts" : "ssd_pass", 3, 13 * sizeof(uint32_t), {}, per_dispatch};
  const uint32_t parts_at = tables.at + 4 * plan.chunks;
  for (size_t first = 0; first < parts.size(); first += per_dispatch) {
    const size_t count = std::min<size_t>(per_dispatch, parts.size() - first);
    const struct {
      uint32_t chunk, states, headdim, head_begin, head_count, chunks_at, parts_at, part_base, ssm_offset,
          fold, write_kv, k_offset, v_offset;
    } push{static_cast<uint32_t>(plan.chunk),
           static_cast<uint32_t>(plan.states),
           static_cast<uint32_t>(plan.headdim),
           head_begin,
           heads,
           tables.at,
           parts_at,
           static_cast<uint32_t>(first),
           u32(static_cast<int64_t>(ssm_offset), op, "state_offset"),
           kv != nullptr && kv->fold,
           kv != nullptr,
           kv != nullptr ? u32(static_cast<int64_t>(kv->k_offset), op, "k_offset") : 0,
           kv != nullptr ? u32(static_cast<int64_t>(kv->v_offset), op, "v_offset") : 0};
    const std::vector<const Buffer*> buffers =
        part_buffers(context, {&scratch, tables.buffer}, parts.subspan(first, count), per_dispatch);
    const uint32_t groups[3] = {heads, static_cast<uint32_t>(count), 1};
    sequence.dispatch(kernel, buffers, &push, sizeof push, groups,
                      "ssd pass " + std::to_string(count) + " parts x" + std::to_string(heads) + " heads");
  }
}

}  // namespace mb::vulkan

// SPDX-License-Identifier: MIT
// The recorders of Mamba-2's ops: its scan (sequential and chunked) and the gated RMSNorm. See vulkan_ops.h
// for their contracts and the shaders for their arithmetic.
#include <algorithm>
#include <functional>
#include <string>
#include <vector>

#include "backends/vulkan/vulkan_op_util.h"
#include "backends/vulkan/vulkan_ops.h"
#include "backends/vulkan/vulkan_ssd.h"
#include "core/error.h"

namespace mb::vulkan {
namespace {

void check_mamba2(const GpuMamba2ScanArgs& a, const char* op) {
  if (a.n_heads <= 0 || a.headdim <= 0 || a.d_state <= 0 || a.n_groups <= 0 || a.n_heads % a.n_groups != 0)
    throw Error(std::string(op) + ": " + std::to_string(a.n_heads) + " heads of " +
                std::to_string(a.headdim) + " channels, d_state " + std::to_string(a.d_state) + ", " +
                std::to_string(a.n_groups) + " groups is not a valid shape");
  if (a.d_state > kMaxScanStates)
    throw Error(std::string(op) + ": d_state " + std::to_string(a.d_state) + " is above " +
                std::to_string(kMaxScanStates));
  const int64_t H = a.n_heads, P = a.headdim, width = H * P + 2 * a.n_groups * a.d_state;
  require_view(a.dt_bias, a.dt_bias_offset, 1, H, 0, 4, op, "dt_bias");
  require_view(a.a_base2, a.a_base2_offset, 1, H, 0, 4, op, "a_base2");
  require_view(a.d_skip, a.d_offset, 1, a.d_per_channel ? H * P : H, 0, 4, op, "d_skip");
  if (a.chunked) require_view(a.a, a.a_offset, 1, H, 0, 4, op, "a");
  for (const Part& part : a.parts) {
    const auto at = [&](uint64_t offset, int64_t ld) {
      return offset + static_cast<uint64_t>(part.first_row * ld);
    };
    require_view(a.xbc, at(a.xbc_offset, a.ldxbc), part.rows, width, a.ldxbc, 4, op, "xbc");
    require_view(a.dt, at(a.dt_offset, a.lddt), part.rows, H, a.lddt, 4, op, "dt");
    require_view(a.y, at(a.y_offset, a.ldy), part.rows, H * P, a.ldy, 4, op, "y");
    require_view(&state_buffer(part.state), a.state_offset, 1, H * a.d_state * P, 0, 4, op, "state");
  }
}

void record_mamba2_chunked(CommandSequence& sequence, const GpuMamba2ScanArgs& a, const char* op) {
  Context& context = sequence.context();
  const SsdPlan plan = plan_ssd(context, a.parts, a.chunk, a.n_heads, a.d_state, a.headdim, 0, op);
  const CommandSequence::Staged tables = sequence.stage(plan.tables);
  const Buffer& scratch = sequence.scratch(plan.scratch_bytes());
  const uint32_t L = static_cast<uint32_t>(plan.chunk), N = static_cast<uint32_t>(a.d_state),
                 P = static_cast<uint32_t>(a.headdim);
  const KernelSpec prep{shader_variant(context, "ssd_prep_mamba2", false), 7, 18 * sizeof(uint32_t), {128}};
  for (uint32_t h0 = 0; h0 < a.n_heads; h0 += plan.head_count) {
    const uint32_t heads = std::min<uint32_t>(plan.head_count, static_cast<uint32_t>(a.n_heads) - h0);
    const struct {
      uint32_t chunk, states, headdim, head_begin, head_count, chunks_at, n_heads, n_groups, ldxbc, lddt,
          xbc_offset, dt_offset, dt_bias_offset, a_offset, d_offset, d_per_channel;
      float dt_min, dt_max;
    } push{L,
           N,
           P,
           h0,
           heads,
           tables.at,
           u32(a.n_heads, op, "n_heads"),
           u32(a.n_groups, op, "n_groups"),
           u32(a.ldxbc, op, "ldxbc"),
           u32(a.lddt, op, "lddt"),
           u32(static_cast<int64_t>(a.xbc_offset), op, "xbc_offset"),
           u32(static_cast<int64_t>(a.dt_offset), op, "dt_offset"),
           u32(static_cast<int64_t>(a.dt_bias_offset), op, "dt_bias_offset"),
           u32(static_cast<int64_t>(a.a_offset), op, "a_offset"),
           u32(static_cast<int64_t>(a.d_offset), op, "d_offset"),
           a.d_per_channel,
           a.dt_min,
           a.dt_max};
    static_assert(sizeof push == 18 * sizeof(uint32_t));
    const Buffer* buffers[] = {&scratch, tables.buffer, a.xbc, a.dt, a.dt_bias, a.a, a.d_skip};
    const uint32_t groups[3] = {heads, plan.chunks, 1};
    sequence.dispatch(
        prep, buffers, &push, sizeof push, groups,
        "ssd prep mamba2 " + std::to_string(plan.chunks) + " chunks x" + std::to_string(heads) + " heads");
    for (uint32_t mode : {0u, 1u, 2u})
      record_ssd_gemm(sequence, plan, mode, scratch, tables, h0, heads, {}, op);
    record_ssd_pass(sequence, plan, scratch, tables, a.parts, h0, heads, a.state_offset, nullptr, op);
    const SsdOutput out{a.y, a.y_offset, a.ldy, a.d_per_channel ? a.d_skip : nullptr, a.d_offset};
    record_ssd_gemm(sequence, plan, 3, scratch, tables, h0, heads, out, op);
  }
}

}  // namespace

void record_mamba2_scan(CommandSequence& sequence, const GpuMamba2ScanArgs& a) {
  const char* op = "vulkan mamba2_scan";
  check_mamba2(a, op);
  if (a.parts.empty()) return;
  if (a.chunked) {
    record_mamba2_chunked(sequence, a, op);
    return;
  }
  Context& context = sequence.context();
  const uint32_t P = static_cast<uint32_t>(a.headdim), N = static_cast<uint32_t>(a.d_state);
  // Shared memory: the two-block ring of x, B, C, dt and the decay, and the lanes' exchange.
  const ScanShape shape = fit_scan(
      context, a.headdim, a.d_state,
      [&](const ScanShape& s) { return uint64_t{2} * s.block * (P + 2 * N + 2) + 2 * s.invocations; }, op);
  const uint32_t per_dispatch = parts_per_dispatch(context, 7);
  const KernelSpec kernel{shader_variant(context, "mamba2_scan", per_dispatch > 1),
                          8,
                          16 * sizeof(uint32_t),
                          {shape.invocations, shape.lanes, shape.regs, shape.block, P, N},
                          per_dispatch};
  for_part_groups(
      sequence, a.parts, per_dispatch, op, [&](size_t first, size_t count, CommandSequence::Staged table) {
        const struct {
          uint32_t n_heads, n_groups, ldxbc, lddt, ldy, xbc_offset, dt_offset, y_offset, dt_bias_offset,
              a_offset, d_offset, d_per_channel;
          float dt_min, dt_max;
          uint32_t state_offset, parts_at;
        } push{u32(a.n_heads, op, "n_heads"),
               u32(a.n_groups, op, "n_groups"),
               u32(a.ldxbc, op, "ldxbc"),
               u32(a.lddt, op, "lddt"),
               u32(a.ldy, op, "ldy"),
               u32(static_cast<int64_t>(a.xbc_offset), op, "xbc_offset"),
               u32(static_cast<int64_t>(a.dt_offset), op, "dt_offset"),
               u32(static_cast<int64_t>(a.y_offset), op, "y_offset"),
               u32(static_cast<int64_t>(a.dt_bias_offset), op, "dt_bias_offset"),
               u32(static_cast<int64_t>(a.a_base2_offset), op, "a_base2_offset"),
               u32(static_cast<int64_t>(a.d_offset), op, "d_offset"),
               a.d_per_channel,
               a.dt_min,
               a.dt_max,
               u32(static_cast<int64_t>(a.state_offset), op, "state_offset"),
               table.at};
        static_assert(sizeof push == 16 * sizeof(uint32_t));
        const std::vector<const Buffer*> buffers =
            part_buffers(context, {a.xbc, a.dt, a.y, a.dt_bias, a.a_base2, a.d_skip, table.buffer},
                         a.parts.subspan(first, count), per_dispatch);
        const uint32_t groups[3] = {static_cast<uint32_t>(a.n_heads), static_cast<uint32_t>(count), 1};
        sequence.dispatch(kernel, buffers, &push, sizeof push, groups,
                          "mamba2_scan " + std::to_string(count) + " parts x" + std::to_string(a.n_heads) +
                              "x" + std::to_string(P) + "x" + std::to_string(N));
      });
}

void record_gated_rms_norm(CommandSequence& sequence, const GpuGatedRmsNormArgs& a) {
  const char* op = "vulkan gated_rms_norm";
  if (a.rows <= 0 || a.dim <= 0) return;
  if (a.group_size <= 0 || a.dim % a.group_size != 0)
    throw Error(std::string(op) + ": group size " + std::to_string(a.group_size) + " does not divide " +
                std::to_string(a.dim) + " channels");
  require_view(a.y, a.y_offset, a.rows, a.dim, a.ldy, 4, op, "y");
  require_view(a.z, a.z_offset, a.rows, a.dim, a.ldz, 4, op, "z");
  if (a.weight != nullptr) require_view(a.weight, a.weight_offset, 1, a.dim, 0, 4, op, "weight");
  require_view(a.out, a.out_offset, a.rows, a.dim, a.ldout, 4, op, "out");
  Context& context = sequence.context();
  const struct {
    uint32_t rows, dim, group_size, ldy, ldz, ldout, y_offset, z_offset, w_offset, out_offset, has_weight;
    float eps;
  } push{u32(a.rows, op, "rows"),
         u32(a.dim, op, "dim"),
         u32(a.group_size, op, "group_size"),
         u32(a.ldy, op, "ldy"),
         u32(a.ldz, op, "ldz"),
         u32(a.ldout, op, "ldout"),
         u32(static_cast<int64_t>(a.y_offset), op, "y_offset"),
         u32(static_cast<int64_t>(a.z_offset), op, "z_offset"),
         u32(static_cast<int64_t>(a.weight_offset), op, "weight_offset"),
         u32(static_cast<int64_t>(a.out_offset), op, "out_offset"),
         a.weight != nullptr,
         a.eps};
  // Groups of a thousand channels or more share their gates among 256 invocations.
  const uint32_t invocations = a.group_size >= 1024 ? 256 : kWorkgroupQuantum;
  const KernelSpec kernel{shader_variant(context, "gated_rms_norm", false), 4, sizeof push, {invocations}};
  const Buffer* weight = a.weight != nullptr ? a.weight : &context.placeholder_buffer();
  const Buffer* buffers[] = {a.y, a.z, weight, a.out};
  uint32_t groups[3];
  spread_groups(sequence, static_cast<uint64_t>(a.rows), groups);
  groups[2] = u32(a.dim / a.group_size, op, "groups");
  sequence.dispatch(kernel, buffers, &push, sizeof push, groups,
                    "gated_rms_norm " + std::to_string(a.rows) + "x" + std::to_string(a.dim) + "/" +
                        std::to_string(a.group_size));
}

}  // namespace mb::vulkan

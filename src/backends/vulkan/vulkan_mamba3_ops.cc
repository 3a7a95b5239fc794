// SPDX-License-Identifier: MIT
// The recorder of Mamba-3's mixer: the per-row preparation, then the sequential scan for the
// parts in that order and the chunked SSD form for the others. See vulkan_ops.h for its contract
// and the shaders for its arithmetic.
#include <algorithm>
#include <string>
#include <vector>

#include "backends/vulkan/vulkan_op_util.h"
#include "backends/vulkan/vulkan_ops.h"
#include "backends/vulkan/vulkan_ssd.h"
#include "core/error.h"
#include "ops/mamba3_scan.h"

namespace mb::vulkan {
namespace {

// The op's state layout (ops/mamba3_scan.h), absolute in each part's state buffer.
Mamba3StateLayout state_layout(const GpuMamba3ScanArgs& a) {
  Mamba3ScanParams p;
  p.n_heads = a.n_heads;
  p.headdim = a.headdim;
  p.d_state = a.d_state;
  p.n_angles = a.n_angles;
  Mamba3StateLayout s = mamba3_state_layout(p);
  const int64_t at = static_cast<int64_t>(a.state_offset);
  s.ssm += at;
  s.k += at;
  s.v += at;
  s.angle += at;
  s.total += at;
  return s;
}

void check_mamba3(const GpuMamba3ScanArgs& a, const char* op) {
  if (a.n_heads <= 0 || a.headdim <= 0 || a.d_state <= 0 || a.n_groups <= 0 || a.n_heads % a.n_groups != 0 ||
      a.n_angles < 0 || 2 * a.n_angles > a.d_state)
    throw Error(std::string(op) + ": " + std::to_string(a.n_heads) + " heads of " +
                std::to_string(a.headdim) + " channels, d_state " + std::to_string(a.d_state) + ", " +
                std::to_string(a.n_groups) + " groups, " + std::to_string(a.n_angles) +
                " angles is not a valid shape");
  if (a.d_state > kMaxScanStates)
    throw Error(std::string(op) + ": d_state " + std::to_string(a.d_state) + " is above " +
                std::to_string(kMaxScanStates));
  if (a.chunked.size() != a.parts.size())
    throw Error(std::string(op) + ": one scan order per part is needed");
  const int64_t H = a.n_heads, N = a.d_state, P = a.headdim, di = H * P;
  const int64_t width = 2 * di + 2 * a.n_groups * N + 3 * H + a.n_angles;
  require_view(a.dt_bias, a.dt_bias_offset, 1, H, 0, 4, op, "dt_bias");
  require_view(a.b_bias, a.b_bias_offset, 1, H * N, 0, 4, op, "b_bias");
  require_view(a.c_bias, a.c_bias_offset, 1, H * N, 0, 4, op, "c_bias");
  require_view(a.b_norm, a.b_norm_offset, 1, N, 0, 4, op, "b_norm");
  require_view(a.c_norm, a.c_norm_offset, 1, N, 0, 4, op, "c_norm");
  require_view(a.d_skip, a.d_offset, 1, H, 0, 4, op, "d_skip");
  if (a.gate_norm != nullptr) require_view(a.gate_norm, a.gate_offset, 1, di, 0, 4, op, "gate_norm");
  const Mamba3StateLayout layout = state_layout(a);
  for (const Part& part : a.parts) {
    const auto at = [&](uint64_t offset, int64_t ld) {
      return offset + static_cast<uint64_t>(part.first_row * ld);
    };
    require_view(a.proj, at(a.proj_offset, a.ldp), part.rows, width, a.ldp, 4, op, "proj");
    require_view(a.y, at(a.y_offset, a.ldy), part.rows, di, a.ldy, 4, op, "y");
    require_view(&state_buffer(part.state), 0, 1, layout.total, 0, 4, op, "state");
  }
}

// mamba3_prepare over every part's rows: BCNorm of B and C, the angle velocities.
void record_prepare(CommandSequence& sequence, const GpuMamba3ScanArgs& a, const char* op) {
  Context& context = sequence.context();
  std::vector<uint32_t> rows;
  int64_t longest = 0;
  for (const Part& part : a.parts) {
    rows.push_back(u32(part.first_row, op, "first_row"));
    rows.push_back(u32(part.rows, op, "rows"));
    longest = std::max(longest, part.rows);
  }
  if (longest == 0) return;
  const CommandSequence::Staged table = sequence.stage(rows);
  const int64_t di = a.n_heads * a.headdim;
  const struct {
    uint32_t d_state, n_groups, n_angles, ldp, proj_offset, b_at, angle_at, b_norm_offset, c_norm_offset;
    float eps;
    uint32_t parts_at;
  } push{u32(a.d_state, op, "d_state"),
         u32(a.n_groups, op, "n_groups"),
         u32(a.n_angles, op, "n_angles"),
         u32(a.ldp, op, "ldp"),
         u32(static_cast<int64_t>(a.proj_offset), op, "proj_offset"),
         u32(2 * di, op, "b column"),
         u32(2 * di + 2 * a.n_groups * a.d_state + 3 * a.n_heads, op, "angle column"),
         u32(static_cast<int64_t>(a.b_norm_offset), op, "b_norm_offset"),
         u32(static_cast<int64_t>(a.c_norm_offset), op, "c_norm_offset"),
         a.eps,
         table.at};
  const KernelSpec kernel{
      shader_variant(context, "mamba3_prepare", false), 4, sizeof push, {kWorkgroupQuantum}};
  const Buffer* buffers[] = {a.proj, a.b_norm, a.c_norm, table.buffer};
  const uint64_t limit = context.limits().maxComputeWorkGroupCount[0];
  const uint32_t groups[3] = {
      static_cast<uint32_t>(std::min<uint64_t>(static_cast<uint64_t>(longest), limit)),
      u32(static_cast<int64_t>(a.parts.size()), op, "parts"), u32(2 * a.n_groups + 1, op, "segments")};
  sequence.dispatch(
      kernel, buffers, &push, sizeof push, groups,
      "mamba3 prepare " + std::to_string(a.parts.size()) + " parts x" + std::to_string(longest));
}

// mamba3_scan.glsl over the parts taken in the sequential order.
void record_sequential(CommandSequence& sequence, const GpuMamba3ScanArgs& a, std::span<const Part> parts,
                       const char* op) {
  Context& context = sequence.context();
  const uint32_t P = static_cast<uint32_t>(a.headdim), N = static_cast<uint32_t>(a.d_state);
  const uint32_t angle_slots = static_cast<uint32_t>(std::max<int64_t>(a.n_angles, 1));
  // Shared memory: the two-block ring of k, q, v and the token scalars, the block's phases, the
  // gate's inverse RMS per cluster of sixteen, and the lanes' exchange.
  const ScanShape shape = fit_scan(
      context, a.headdim, a.d_state,
      [&](const ScanShape& s) {
        return uint64_t{2} * s.block * (2 * N + P + 4) + s.block * angle_slots + s.invocations / 16 +
               2 * s.invocations;
      },
      op);
  const uint32_t per_dispatch = parts_per_dispatch(context, 8);
  const KernelSpec kernel{shader_variant(context, "mamba3_scan", per_dispatch > 1),
                          9,
                          20 * sizeof(uint32_t),
                          {shape.invocations, shape.lanes, shape.regs, shape.block, P, N, angle_slots},
                          per_dispatch};
  const Mamba3StateLayout layout = state_layout(a);
  const Buffer* gate = a.gate_norm != nullptr ? a.gate_norm : &context.placeholder_buffer();
  for_part_groups(
      sequence, parts, per_dispatch, op, [&](size_t first, size_t count, CommandSequence::Staged table) {
        const struct {
          uint32_t n_heads, n_groups, n_angles, ldp, ldy, proj_offset, y_offset, dt_bias_offset,
              b_bias_offset, c_bias_offset, d_offset, gate_offset, has_gate;
          float a_floor, eps;
          uint32_t ssm_offset, k_offset, v_offset, angle_offset, parts_at;
        } push{u32(a.n_heads, op, "n_heads"),
               u32(a.n_groups, op, "n_groups"),
               u32(a.n_angles, op, "n_angles"),
               u32(a.ldp, op, "ldp"),
               u32(a.ldy, op, "ldy"),
               u32(static_cast<int64_t>(a.proj_offset), op, "proj_offset"),
               u32(static_cast<int64_t>(a.y_offset), op, "y_offset"),
               u32(static_cast<int64_t>(a.dt_bias_offset), op, "dt_bias_offset"),
               u32(static_cast<int64_t>(a.b_bias_offset), op, "b_bias_offset"),
               u32(static_cast<int64_t>(a.c_bias_offset), op, "c_bias_offset"),
               u32(static_cast<int64_t>(a.d_offset), op, "d_offset"),
               u32(static_cast<int64_t>(a.gate_offset), op, "gate_offset"),
               a.gate_norm != nullptr,
               a.a_floor,
               a.eps,
               u32(layout.ssm, op, "ssm offset"),
               u32(layout.k, op, "k offset"),
               u32(layout.v, op, "v offset"),
               u32(layout.angle, op, "angle offset"),
               table.at};
        static_assert(sizeof push == 20 * sizeof(uint32_t));
        const std::vector<const Buffer*> buffers =
            part_buffers(context, {a.proj, a.y, a.dt_bias, a.b_bias, a.c_bias, a.d_skip, gate, table.buffer},
                         parts.subspan(first, count), per_dispatch);
        const uint32_t groups[3] = {static_cast<uint32_t>(a.n_heads), static_cast<uint32_t>(count), 1};
        sequence.dispatch(kernel, buffers, &push, sizeof push, groups,
                          "mamba3_scan " + std::to_string(count) + " parts x" + std::to_string(a.n_heads) +
                              "x" + std::to_string(P) + "x" + std::to_string(N));
      });
}

// mamba3_angles over the chunked parts: each row's phases into the scratch from `angles_at`.
void record_angles(CommandSequence& sequence, const GpuMamba3ScanArgs& a, std::span<const Part> parts,
                   const Buffer& scratch, uint64_t angles_at, const char* op) {
  Context& context = sequence.context();
  const uint32_t per_dispatch = parts_per_dispatch(context, 4);
  const KernelSpec kernel{
      per_dispatch > 1 ? "mamba3_angles_parts" : "mamba3_angles", 5, 12 * sizeof(uint32_t), {}, per_dispatch};
  const int64_t H = a.n_heads, dt_at = 2 * H * a.headdim + 2 * a.n_groups * a.d_state;
  const Mamba3StateLayout layout = state_layout(a);
  for_part_groups(
      sequence, parts, per_dispatch, op, [&](size_t first, size_t count, CommandSequence::Staged table) {
        const struct {
          uint32_t n_heads, n_angles, angle_slots, ldp, proj_offset, dt_at, omega_at, dt_bias_offset,
              angle_offset, angles_at, parts_at, part_base;
        } push{u32(H, op, "n_heads"),
               u32(a.n_angles, op, "n_angles"),
               u32(std::max<int64_t>(a.n_angles, 1), op, "angle slots"),
               u32(a.ldp, op, "ldp"),
               u32(static_cast<int64_t>(a.proj_offset), op, "proj_offset"),
               u32(dt_at, op, "dt column"),
               u32(dt_at + 3 * H, op, "angle column"),
               u32(static_cast<int64_t>(a.dt_bias_offset), op, "dt_bias_offset"),
               u32(layout.angle, op, "angle offset"),
               u32(static_cast<int64_t>(angles_at), op, "angles_at"),
               table.at,
               0};
        const std::vector<const Buffer*> buffers = part_buffers(
            context, {&scratch, a.proj, a.dt_bias, table.buffer}, parts.subspan(first, count), per_dispatch);
        const uint32_t groups[3] = {static_cast<uint32_t>(H), static_cast<uint32_t>(count), 1};
        sequence.dispatch(
            kernel, buffers, &push, sizeof push, groups,
            "mamba3 angles " + std::to_string(count) + " parts x" + std::to_string(H) + " heads");
      });
}

// The chunked SSD form over `parts` (mamba3_angles, then per pass over the heads the chunk inputs,
// the products, the state passing with the boundary fold, the outputs and the gate).
void record_chunked(CommandSequence& sequence, const GpuMamba3ScanArgs& a, std::span<const Part> parts,
                    const char* op) {
  Context& context = sequence.context();
  const int64_t H = a.n_heads, N = a.d_state, P = a.headdim, slots = std::max<int64_t>(a.n_angles, 1);
  int64_t round_rows = 0;
  for (const Part& part : parts) round_rows = std::max(round_rows, part.first_row + part.rows);
  const uint64_t angle_floats = a.n_angles > 0 ? static_cast<uint64_t>(round_rows * H * slots) : 0;
  const SsdPlan plan = plan_ssd(context, parts, a.chunk, H, N, P, angle_floats, op);
  const CommandSequence::Staged tables = sequence.stage(plan.tables);
  const Buffer& scratch = sequence.scratch(plan.scratch_bytes());
  if (a.n_angles > 0) record_angles(sequence, a, parts, scratch, plan.extra_at(), op);
  const Mamba3StateLayout layout = state_layout(a);
  const SsdPassKv kv{a.boundary_fold, static_cast<uint64_t>(layout.k), static_cast<uint64_t>(layout.v)};
  const KernelSpec prep{shader_variant(context, "ssd_prep_mamba3", false), 7, 18 * sizeof(uint32_t), {128}};
  const KernelSpec gate{shader_variant(context, "ssd_gate_mamba3", false), 5, 13 * sizeof(uint32_t), {128}};
  const Buffer* gate_norm = a.gate_norm != nullptr ? a.gate_norm : &context.placeholder_buffer();
  const uint32_t L = static_cast<uint32_t>(plan.chunk);
  for (uint32_t h0 = 0; h0 < H; h0 += plan.head_count) {
    const uint32_t heads = std::min<uint32_t>(plan.head_count, static_cast<uint32_t>(H) - h0);
    const uint32_t groups[3] = {heads, plan.chunks, 1};
    const std::string shape = std::to_string(plan.chunks) + " chunks x" + std::to_string(heads) + " heads";
    const struct {
      uint32_t chunk, states, headdim, head_begin, head_count, chunks_at, n_heads, n_groups, n_angles,
          angle_slots, ldp, proj_offset, dt_bias_offset, b_bias_offset, c_bias_offset, d_offset;
      float a_floor;
      uint32_t angles_at;
    } prep_push{L,
                u32(N, op, "d_state"),
                u32(P, op, "headdim"),
                h0,
                heads,
                tables.at,
                u32(H, op, "n_heads"),
                u32(a.n_groups, op, "n_groups"),
                u32(a.n_angles, op, "n_angles"),
                u32(slots, op, "angle slots"),
                u32(a.ldp, op, "ldp"),
                u32(static_cast<int64_t>(a.proj_offset), op, "proj_offset"),
                u32(static_cast<int64_t>(a.dt_bias_offset), op, "dt_bias_offset"),
                u32(static_cast<int64_t>(a.b_bias_offset), op, "b_bias_offset"),
                u32(static_cast<int64_t>(a.c_bias_offset), op, "c_bias_offset"),
                u32(static_cast<int64_t>(a.d_offset), op, "d_offset"),
                a.a_floor,
                u32(static_cast<int64_t>(plan.extra_at()), op, "angles_at")};
    static_assert(sizeof prep_push == 18 * sizeof(uint32_t));
    const Buffer* prep_buffers[] = {&scratch, tables.buffer, a.proj, a.dt_bias, a.b_bias, a.c_bias, a.d_skip};
    sequence.dispatch(prep, prep_buffers, &prep_push, sizeof prep_push, groups, "ssd prep mamba3 " + shape);
    for (uint32_t mode : {0u, 1u, 2u})
      record_ssd_gemm(sequence, plan, mode, scratch, tables, h0, heads, {}, op);
    record_ssd_pass(sequence, plan, scratch, tables, parts, h0, heads, static_cast<uint64_t>(layout.ssm), &kv,
                    op);
    record_ssd_gemm(sequence, plan, 4, scratch, tables, h0, heads, {}, op);
    const struct {
      uint32_t chunk, states, headdim, head_begin, head_count, chunks_at, ldp, proj_offset, ldy, y_offset,
          gate_offset, has_gate;
      float eps;
    } gate_push{L,
                u32(N, op, "d_state"),
                u32(P, op, "headdim"),
                h0,
                heads,
                tables.at,
                u32(a.ldp, op, "ldp"),
                u32(static_cast<int64_t>(a.proj_offset), op, "proj_offset"),
                u32(a.ldy, op, "ldy"),
                u32(static_cast<int64_t>(a.y_offset), op, "y_offset"),
                u32(static_cast<int64_t>(a.gate_offset), op, "gate_offset"),
                a.gate_norm != nullptr,
                a.eps};
    static_assert(sizeof gate_push == 13 * sizeof(uint32_t));
    const Buffer* gate_buffers[] = {&scratch, tables.buffer, a.proj, gate_norm, a.y};
    sequence.dispatch(gate, gate_buffers, &gate_push, sizeof gate_push, groups, "ssd gate mamba3 " + shape);
  }
}

}  // namespace

void record_mamba3_scan(CommandSequence& sequence, const GpuMamba3ScanArgs& a) {
  const char* op = "vulkan mamba3_scan";
  check_mamba3(a, op);
  if (a.parts.empty()) return;
  if (!sequence.context().info().float64)
    throw Error(std::string(op) + ": " + sequence.context().info().name +
                " lacks shaderFloat64, which Mamba-3's phase update needs");
  record_prepare(sequence, a, op);
  std::vector<Part> sequential, chunked;
  for (size_t i = 0; i < a.parts.size(); ++i) (a.chunked[i] ? chunked : sequential).push_back(a.parts[i]);
  if (!sequential.empty()) record_sequential(sequence, a, sequential, op);
  if (!chunked.empty()) record_chunked(sequence, a, chunked, op);
}

}  // namespace mb::vulkan

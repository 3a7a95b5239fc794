// The recorders of Mamba-2's and Mamba-3's ops: the scans (sequential and chunked), the gated
// RMSNorm. See vulkan_ops.h for their contracts and the shaders for their arithmetic.
#include <algorithm>
#include <functional>
#include <string>
#include <vector>

#include "backends/vulkan/vulkan_op_util.h"
#include "backends/vulkan/vulkan_ops.h"
#include "core/error.h"

namespace mb::vulkan {
namespace {

// Workgroup sizes are multiples of this, the largest common subgroup size, so that subgroups tile
// the workgroup (mb_lanes.glsl).
constexpr uint32_t kWorkgroupQuantum = 64;

uint32_t round_up(uint32_t value, uint32_t quantum) {
  return (value + quantum - 1) / quantum * quantum;
}

uint32_t next_power_of_two(uint32_t value) {
  uint32_t p = 1;
  while (p < value) p *= 2;
  return p;
}

// The shape of a sequential scan's workgroup (mamba2_scan.glsl, mamba3_scan.glsl): one head of
// `headdim` channels, each channel's N states over `lanes` invocations of `regs` registers, with
// `block` positions staged at a time.
struct ScanShape {
  uint32_t invocations = 0, lanes = 0, regs = 0, block = 0;
};

// The widest shape the device runs: lanes holding at most 16 states each (up to 16 lanes), fewer
// lanes where the workgroup would exceed the device's invocations, and staging blocks of 8
// positions (at least lanes - 1 + `lookback`), fewer where `shared_floats` exceeds its shared
// memory. Throws when not even one lane per channel fits.
ScanShape fit_scan(const Context& context, int64_t headdim, int64_t d_state, uint32_t lookback,
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
    const uint32_t least_block = std::max<uint32_t>(1, lanes - 1 + lookback);
    for (shape.block = std::max<uint32_t>(8, least_block); shape.block >= least_block; --shape.block)
      if (4 * shared_floats(shape) <= limits.maxComputeSharedMemorySize) return shape;
  }
  throw Error(std::string(op) + ": a head of " + std::to_string(headdim) + " channels with d_state " +
              std::to_string(d_state) + " needs more shared memory or invocations than " +
              context.info().name + " offers");
}

// The shader variant: `name`, then "_parts" for the batched one, then "_subgroup" where the
// device's subgroup shuffles are used.
std::string variant(const Context& context, std::string name, bool parts) {
  if (parts) name += "_parts";
  if (context.subgroup_ops()) name += "_subgroup";
  return name;
}

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

// ---- the chunked SSD form (ssd_layout.glsl) ---------------------------------------------------

// The chunks of a round's parts: each part's rows cut into chunks of `chunk` positions from its
// first row, in windows of whole chunks (Mamba-3's continued windows: the CPU's time blocks of
// mamba3_kernels.inc, max(64, chunk) rounded up to whole chunks), and the two tables the shaders
// read: per chunk its part, first row, length and flags; per part its first chunk, chunk count,
// first row and row count.
struct SsdPlan {
  int64_t chunk = 0, states = 0, headdim = 0;
  uint32_t chunks = 0;  // over all parts
  std::vector<uint32_t> tables;
  uint64_t batch_floats = 0;  // ssd_layout.glsl's kBatchFloats
  uint32_t head_count = 0;    // heads per pass over the scratch
};

constexpr uint32_t kWindowStart = 1, kWindowEnd = 2;  // ssd_layout.glsl's chunk flags
constexpr int64_t kWindowRows = 64;                   // the CPU's time block (kTimeBlock)

SsdPlan plan_ssd(const Context& context, std::span<const Part> parts, int64_t chunk, int64_t n_heads,
                 int64_t d_state, int64_t headdim, const char* op) {
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
  plan.batch_floats = 3 * L * N + 3 * L * P + L * L + 2 * N * P + 8 * L + 4 + N;
  // As many heads per pass as one scratch binding spans and the workgroup counts allow.
  const VkPhysicalDeviceLimits& limits = context.limits();
  const uint64_t per_head = std::max<uint64_t>(plan.chunks, 1) * plan.batch_floats * 4;
  const uint64_t by_bytes = context.info().max_storage_buffer_bytes / per_head;
  const uint64_t by_groups = limits.maxComputeWorkGroupCount[2] / std::max<uint32_t>(plan.chunks, 1);
  plan.head_count = static_cast<uint32_t>(std::min<uint64_t>({by_bytes, by_groups, uint64_t(n_heads)}));
  if (plan.head_count == 0 || plan.chunks > limits.maxComputeWorkGroupCount[1])
    throw Error(std::string(op) + ": the chunked form of " + std::to_string(plan.chunks) + " chunks of " +
                std::to_string(chunk) + " positions exceeds " + context.info().name +
                "'s buffers; run the round in smaller pieces (a smaller --chunk)");
  return plan;
}

// One of ssd_gemm.comp's products over the heads [head_begin, head_begin + plan.head_count).
void record_ssd_gemm(CommandSequence& sequence, const SsdPlan& plan, uint32_t mode, const Buffer& scratch,
                     CommandSequence::Staged tables, uint32_t head_begin, uint32_t heads, const Buffer* y,
                     uint64_t y_offset, int64_t ldy, const Buffer* d_skip, uint64_t d_offset,
                     bool d_per_channel, const char* op) {
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
         u32(ldy, op, "ldy"),
         u32(static_cast<int64_t>(y_offset), op, "y_offset"),
         u32(static_cast<int64_t>(d_offset), op, "d_offset"),
         d_per_channel};
  const KernelSpec kernel{"ssd_gemm", 4, sizeof push, {mode}};
  const Buffer* placeholder = &sequence.context().placeholder_buffer();
  const Buffer* buffers[] = {&scratch, tables.buffer, y != nullptr ? y : placeholder,
                             d_skip != nullptr ? d_skip : placeholder};
  const uint32_t groups[3] = {ceil_div(columns, 16), ceil_div(rows, 16), plan.chunks * heads};
  sequence.dispatch(kernel, buffers, &push, sizeof push, groups,
                    std::string("ssd ") + names[mode] + " " + std::to_string(plan.chunks) + " chunks x" +
                        std::to_string(heads) + " heads");
}

// ssd_pass.glsl over every part (groups of kMaxGpuParts with buffer arrays), heads
// [head_begin, head_begin + heads). With `kv`, Mamba-3's fold (when `fold`) and k and v states.
struct SsdPassKv {
  bool fold = false;
  uint64_t k_offset = 0, v_offset = 0;
};
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

void record_mamba2_chunked(CommandSequence& sequence, const GpuMamba2ScanArgs& a, const char* op) {
  Context& context = sequence.context();
  const SsdPlan plan = plan_ssd(context, a.parts, a.chunk, a.n_heads, a.d_state, a.headdim, op);
  const CommandSequence::Staged tables = sequence.stage(plan.tables);
  const Buffer& scratch = sequence.scratch(plan.head_count * plan.chunks * plan.batch_floats * 4);
  const uint32_t L = static_cast<uint32_t>(plan.chunk), N = static_cast<uint32_t>(a.d_state),
                 P = static_cast<uint32_t>(a.headdim);
  const KernelSpec prep{variant(context, "ssd_prep_mamba2", false), 7, 18 * sizeof(uint32_t), {128}};
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
      record_ssd_gemm(sequence, plan, mode, scratch, tables, h0, heads, nullptr, 0, 0, nullptr, 0, false, op);
    record_ssd_pass(sequence, plan, scratch, tables, a.parts, h0, heads, a.state_offset, nullptr, op);
    record_ssd_gemm(sequence, plan, 3, scratch, tables, h0, heads, a.y, a.y_offset, a.ldy, a.d_skip,
                    a.d_offset, a.d_per_channel, op);
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
      context, a.headdim, a.d_state, 0,
      [&](const ScanShape& s) { return uint64_t{2} * s.block * (P + 2 * N + 2) + 2 * s.invocations; }, op);
  const uint32_t per_dispatch = parts_per_dispatch(context, 7);
  const KernelSpec kernel{variant(context, "mamba2_scan", per_dispatch > 1),
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
  const KernelSpec kernel{variant(context, "gated_rms_norm", false), 4, sizeof push, {invocations}};
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

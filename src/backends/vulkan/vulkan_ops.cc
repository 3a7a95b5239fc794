// SPDX-License-Identifier: MIT
#include "backends/vulkan/vulkan_ops.h"

#include <algorithm>
#include <limits>
#include <string>
#include <vector>

#include "backends/vulkan/vulkan_op_util.h"
#include "core/error.h"
#include "ops/causal_conv.h"
#include "ops/matmul.h"
#include "ops/selective_scan.h"

namespace mb::vulkan {
namespace {

constexpr uint32_t kGroupWidth = 64;  // local_size_x of the one-dimensional shaders
constexpr uint32_t kMatmulRows = 4;   // kRows of matmul.comp

// matmul_tiled.comp's fixed shape: 16 invocations across a panel, each 8 rows by 4 columns, K
// staged 16 at a time. Its row groups (local y, a specialization constant) set the tile's rows.
constexpr uint32_t kTiledColumnGroups = 16;
constexpr uint32_t kTiledRowsPerInvocation = 8;
constexpr uint32_t kTiledDepth = 16;

// The shared memory of matmul_tiled.comp with `row_groups`: the padded x slice, the decoded
// panel slice and one inverse RMS per row.
uint64_t tiled_shared_bytes(uint32_t row_groups) {
  const uint64_t tile_rows = uint64_t{row_groups} * kTiledRowsPerInvocation;
  return 4 * (kTiledDepth * (tile_rows + 4) + kTiledDepth * kPanelWidth + tile_rows);
}

// The most row groups (up to 16: 128-row tiles of 256 invocations) the device's workgroup limits
// allow, or 0 when not even one fits (then the decode shader serves every shape). Every
// conforming device fits 8 (at least 128 invocations and 16 KiB of shared memory).
uint32_t tiled_row_groups(const Context& context) {
  const VkPhysicalDeviceLimits& limits = context.limits();
  for (uint32_t groups = 16; groups >= 1; groups /= 2) {
    if (kTiledColumnGroups * groups <= limits.maxComputeWorkGroupInvocations &&
        groups <= limits.maxComputeWorkGroupSize[1] &&
        kTiledColumnGroups <= limits.maxComputeWorkGroupSize[0] &&
        tiled_shared_bytes(groups) <= limits.maxComputeSharedMemorySize)
      return groups;
  }
  return 0;
}

// The weight dtype as the shaders' push constants name it (packed_weights.glsl).
uint32_t dtype_code(DType dtype) {
  return dtype == DType::F32 ? 0 : dtype == DType::BF16 ? 1 : 2;
}

}  // namespace

uint32_t ceil_div(uint64_t a, uint64_t b) {
  return static_cast<uint32_t>((a + b - 1) / b);
}

uint32_t u32(int64_t value, const char* op, const char* name) {
  if (value < 0 || value > std::numeric_limits<uint32_t>::max())
    throw Error(std::string(op) + ": " + name + " = " + std::to_string(value) + " is out of range");
  return static_cast<uint32_t>(value);
}

void require_view(const Buffer* buffer, uint64_t offset, int64_t rows, int64_t cols, int64_t ld,
                  uint64_t element_bytes, const char* op, const char* name) {
  if (buffer == nullptr) throw Error(std::string(op) + ": no buffer for " + name);
  if (rows <= 0 || cols <= 0) return;
  if (rows > 1 && ld < cols)
    throw Error(std::string(op) + ": the row stride of " + name + " (" + std::to_string(ld) +
                ") is below its width (" + std::to_string(cols) + ")");
  const uint64_t end =
      offset + static_cast<uint64_t>(rows - 1) * static_cast<uint64_t>(ld) + static_cast<uint64_t>(cols);
  if (end * element_bytes > buffer->bytes())
    throw Error(std::string(op) + ": " + name + " needs " + std::to_string(end * element_bytes) +
                " bytes of a buffer of " + std::to_string(buffer->bytes()));
}

void spread_groups(CommandSequence& sequence, uint64_t count, uint32_t (&groups)[3]) {
  const uint64_t limit = sequence.context().limits().maxComputeWorkGroupCount[0];
  groups[0] = static_cast<uint32_t>(std::min<uint64_t>(count, limit));
  groups[1] = groups[0] > 0 ? ceil_div(count, groups[0]) : 0;
  groups[2] = 1;
}

void record_matmul(CommandSequence& sequence, const GpuMatmulArgs& a) {
  const char* op = "vulkan matmul";
  if (a.m <= 0 || a.rows <= 0) return;
  const uint64_t weight_bytes = a.dtype == DType::F32 ? 4 : 2;
  const int64_t panels = (a.rows + kPanelWidth - 1) / kPanelWidth;
  require_view(a.x, a.x_offset, a.m, a.cols, a.ldx, 4, op, "x");
  require_view(a.w, a.w_offset, 1, panels * a.cols * kPanelWidth, 0, weight_bytes, op, "the packed weights");
  if (a.bias != nullptr) require_view(a.bias, a.bias_offset, 1, a.rows, 0, 4, op, "bias");
  if (a.norm_weight != nullptr)
    require_view(a.norm_weight, a.norm_offset, 1, a.cols, 0, 4, op, "norm weight");
  require_view(a.y, a.y_offset, a.m, a.rows, a.ldy, 4, op, "y");
  if (a.softplus && a.accumulate) throw Error("vulkan matmul: softplus cannot be combined with accumulate");
  const struct {
    uint32_t m, n, k, ldx, ldy, x_offset, y_offset, bias_offset, w_offset, dtype, has_bias, accumulate,
        softplus, norm_offset;
    float norm_eps;
  } push{u32(a.m, op, "m"),
         u32(a.rows, op, "rows"),
         u32(a.cols, op, "cols"),
         u32(a.ldx, op, "ldx"),
         u32(a.ldy, op, "ldy"),
         u32(static_cast<int64_t>(a.x_offset), op, "x_offset"),
         u32(static_cast<int64_t>(a.y_offset), op, "y_offset"),
         u32(static_cast<int64_t>(a.bias_offset), op, "bias_offset"),
         u32(static_cast<int64_t>(a.w_offset), op, "w_offset"),
         dtype_code(a.dtype),
         a.bias != nullptr,
         a.accumulate,
         a.softplus,
         u32(static_cast<int64_t>(a.norm_offset), op, "norm_offset"),
         a.norm_eps};
  const Context& context = sequence.context();
  const Buffer* bias = a.bias != nullptr ? a.bias : &context.placeholder_buffer();
  const Buffer* norm = a.norm_weight != nullptr ? a.norm_weight : &context.placeholder_buffer();
  const Buffer* buffers[] = {a.x, a.w, bias, a.y, norm};
  const uint32_t row_groups = a.m >= kMatmulTiledMinRows ? tiled_row_groups(context) : 0;
  const uint32_t tile_rows = row_groups > 0 ? row_groups * kTiledRowsPerInvocation : kMatmulRows;
  const uint64_t row_tiles = (static_cast<uint64_t>(a.m) + tile_rows - 1) / tile_rows;
  if (row_tiles > context.limits().maxComputeWorkGroupCount[1] ||
      static_cast<uint64_t>(panels) > context.limits().maxComputeWorkGroupCount[0])
    throw Error(std::string(op) + ": " + std::to_string(a.m) + " rows by " + std::to_string(a.rows) +
                " outputs exceed the device's workgroup counts");
  const uint32_t groups[3] = {static_cast<uint32_t>(panels), static_cast<uint32_t>(row_tiles), 1};
  const std::string label = std::string(row_groups > 0 ? "matmul_tiled " : "matmul ") +
                            (a.norm_weight != nullptr ? "rms_norm+" : "") + std::to_string(a.m) + "x" +
                            std::to_string(a.rows) + "x" + std::to_string(a.cols);
  // Specialization: constant 0 fuses the norm, constant 1 sets the tiled shader's row groups.
  const uint32_t fused = a.norm_weight != nullptr;
  const KernelSpec kernel = row_groups > 0 ? KernelSpec{"matmul_tiled", 5, sizeof push, {fused, row_groups}}
                                           : KernelSpec{"matmul", 5, sizeof push, {fused}};
  sequence.dispatch(kernel, buffers, &push, sizeof push, groups, label);
}

void record_rms_norm(CommandSequence& sequence, const GpuRmsNormArgs& a) {
  if (a.rows <= 0 || a.dim <= 0) return;
  const GpuRmsNormSegment segment{0, a.dim, a.weight_offset};
  record_rms_norm_segments(sequence, {a.x, a.x_offset, a.ldx, a.rows, a.weight, a.eps, a.y, a.y_offset, a.ldy,
                                      std::span(&segment, 1)});
}

void record_rms_norm_segments(CommandSequence& sequence, const GpuRmsNormSegmentsArgs& a) {
  const char* op = "vulkan rms_norm";
  if (a.segments.empty() || a.segments.size() > static_cast<size_t>(kMaxRmsNormSegments))
    throw Error(std::string(op) + ": " + std::to_string(a.segments.size()) + " segments; 1 to " +
                std::to_string(kMaxRmsNormSegments) + " are supported");
  struct {
    uint32_t rows, ldx, ldy, x_offset, y_offset;
    float eps;
    uint32_t column[kMaxRmsNormSegments], dim[kMaxRmsNormSegments], w_offset[kMaxRmsNormSegments];
  } push{u32(a.rows, op, "rows"),
         u32(a.ldx, op, "ldx"),
         u32(a.ldy, op, "ldy"),
         u32(static_cast<int64_t>(a.x_offset), op, "x_offset"),
         u32(static_cast<int64_t>(a.y_offset), op, "y_offset"),
         a.eps,
         {},
         {},
         {}};
  std::string shape;
  for (size_t i = 0; i < a.segments.size(); ++i) {
    const GpuRmsNormSegment& g = a.segments[i];
    if (g.dim <= 0 || g.column < 0)
      throw Error(std::string(op) + ": segment " + std::to_string(i) + " has width " + std::to_string(g.dim) +
                  " at column " + std::to_string(g.column));
    for (size_t j = 0; j < i; ++j) {
      const GpuRmsNormSegment& h = a.segments[j];
      if (g.column < h.column + h.dim && h.column < g.column + g.dim)
        throw Error(std::string(op) + ": segments " + std::to_string(j) + " and " + std::to_string(i) +
                    " overlap");
    }
    require_view(a.x, a.x_offset + static_cast<uint64_t>(g.column), a.rows, g.dim, a.ldx, 4, op, "x");
    require_view(a.weight, g.weight_offset, 1, g.dim, 0, 4, op, "weight");
    require_view(a.y, a.y_offset + static_cast<uint64_t>(g.column), a.rows, g.dim, a.ldy, 4, op, "y");
    push.column[i] = u32(g.column, op, "column");
    push.dim[i] = u32(g.dim, op, "dim");
    push.w_offset[i] = u32(static_cast<int64_t>(g.weight_offset), op, "weight_offset");
    shape += (i > 0 ? "+" : "") + std::to_string(g.dim);
  }
  if (a.rows <= 0) return;
  static const KernelSpec kernel{"rms_norm", 3, sizeof push, {}};
  const Buffer* buffers[] = {a.x, a.weight, a.y};
  uint32_t groups[3];
  spread_groups(sequence, static_cast<uint64_t>(a.rows), groups);
  groups[2] = static_cast<uint32_t>(a.segments.size());
  sequence.dispatch(kernel, buffers, &push, sizeof push, groups,
                    "rms_norm " + std::to_string(a.rows) + "x" + shape);
}

uint32_t parts_per_dispatch(const Context& context, uint32_t plain_bindings) {
  const VkPhysicalDeviceLimits& limits = context.limits();
  const uint32_t most =
      std::min(limits.maxPerStageDescriptorStorageBuffers, limits.maxDescriptorSetStorageBuffers);
  return context.buffer_arrays() && plain_bindings + kMaxGpuParts <= most ? kMaxGpuParts : 1;
}

std::vector<const Buffer*> part_buffers(const Context& context, std::initializer_list<const Buffer*> plain,
                                        std::span<const Part> group, uint32_t array_size) {
  std::vector<const Buffer*> buffers(plain);
  for (uint32_t i = 0; i < array_size; ++i)
    buffers.push_back(i < group.size() ? &state_buffer(group[i].state) : &context.placeholder_buffer());
  return buffers;
}

void record_causal_conv_silu(CommandSequence& sequence, const GpuCausalConvArgs& a) {
  const char* op = "vulkan causal_conv_silu";
  if (a.kernel_size < 1 || a.kernel_size > kMaxConvKernel)
    throw Error(std::string(op) + ": kernel size " + std::to_string(a.kernel_size) + " is outside 1.." +
                std::to_string(kMaxConvKernel));
  if (a.channels <= 0 || a.parts.empty()) return;
  require_view(a.weight, a.weight_offset, a.kernel_size, a.channels, a.channels, 4, op, "weight");
  if (a.bias != nullptr) require_view(a.bias, a.bias_offset, 1, a.channels, 0, 4, op, "bias");
  for (const Part& part : a.parts) {
    require_view(a.x, a.x_offset + static_cast<uint64_t>(part.first_row * a.ldx), part.rows, a.channels,
                 a.ldx, 4, op, "x");
    require_view(&state_buffer(part.state), a.history_offset, a.kernel_size - 1, a.channels, a.channels, 4,
                 op, "history");
    require_view(a.y, a.y_offset + static_cast<uint64_t>(part.first_row * a.ldy), part.rows, a.channels,
                 a.ldy, 4, op, "y");
  }
  Context& context = sequence.context();
  const uint32_t per_dispatch = parts_per_dispatch(context, 5);
  const KernelSpec kernel{
      per_dispatch > 1 ? "causal_conv_parts" : "causal_conv", 6, 11 * sizeof(uint32_t), {}, per_dispatch};
  const Buffer* bias = a.bias != nullptr ? a.bias : &context.placeholder_buffer();
  for_part_groups(
      sequence, a.parts, per_dispatch, op, [&](size_t first, size_t count, CommandSequence::Staged table) {
        const uint32_t parts_at = table.at;
        const struct {
          uint32_t channels, kernel_size, ldx, ldy, x_offset, y_offset, w_offset, bias_offset, history_offset,
              has_bias, parts_at;
        } push{u32(a.channels, op, "channels"),
               static_cast<uint32_t>(a.kernel_size),
               u32(a.ldx, op, "ldx"),
               u32(a.ldy, op, "ldy"),
               u32(static_cast<int64_t>(a.x_offset), op, "x_offset"),
               u32(static_cast<int64_t>(a.y_offset), op, "y_offset"),
               u32(static_cast<int64_t>(a.weight_offset), op, "weight_offset"),
               u32(static_cast<int64_t>(a.bias_offset), op, "bias_offset"),
               u32(static_cast<int64_t>(a.history_offset), op, "history_offset"),
               a.bias != nullptr,
               parts_at};
        static_assert(sizeof push == 11 * sizeof(uint32_t));
        const std::vector<const Buffer*> buffers = part_buffers(
            context, {a.x, a.weight, bias, a.y, table.buffer}, a.parts.subspan(first, count), per_dispatch);
        const uint32_t groups[3] = {ceil_div(a.channels, kGroupWidth), static_cast<uint32_t>(count), 1};
        sequence.dispatch(kernel, buffers, &push, sizeof push, groups,
                          "causal_conv " + std::to_string(count) + " parts x" + std::to_string(a.channels));
      });
}

void record_selective_scan(CommandSequence& sequence, const GpuSelectiveScanArgs& a) {
  const char* op = "vulkan selective_scan";
  if (a.d_state < 1 || a.d_state > kMaxStateSize)
    throw Error(std::string(op) + ": d_state " + std::to_string(a.d_state) + " is outside 1.." +
                std::to_string(kMaxStateSize));
  if (a.channels <= 0 || a.parts.empty()) return;
  require_view(a.a_base2, a.a_offset, a.d_state, a.channels, a.channels, 4, op, "a_base2");
  require_view(a.d_skip, a.d_offset, 1, a.channels, 0, 4, op, "d_skip");
  if (a.fused_dt) {
    const GpuSelectiveScanFusedDt& f = *a.fused_dt;
    if (f.rank <= 0) throw Error(std::string(op) + ": the fused dt_proj has rank " + std::to_string(f.rank));
    if (f.dtype != DType::F32 && f.dtype != DType::BF16 && f.dtype != DType::F16)
      throw Error(std::string(op) + ": the fused dt_proj weights are " + std::string(dtype_name(f.dtype)) +
                  "; f32, bf16 and f16 are supported");
    const int64_t panels = (a.channels + kPanelWidth - 1) / kPanelWidth;
    require_view(f.weight, f.weight_offset, 1, panels * f.rank * kPanelWidth, 0,
                 f.dtype == DType::F32 ? 4 : 2, op, "the packed dt_proj weights");
    require_view(f.bias, f.bias_offset, 1, a.channels, 0, 4, op, "dt_proj bias");
  }
  for (const Part& part : a.parts) {
    const auto at = [&](uint64_t offset, int64_t ld) {
      return offset + static_cast<uint64_t>(part.first_row * ld);
    };
    require_view(a.u, at(a.u_offset, a.ldu), part.rows, a.channels, a.ldu, 4, op, "u");
    if (a.fused_dt)
      require_view(a.bc, at(a.fused_dt->dt_low_offset, a.ldbc), part.rows, a.fused_dt->rank, a.ldbc, 4, op,
                   "dt_low");
    else
      require_view(a.dt, at(a.dt_offset, a.lddt), part.rows, a.channels, a.lddt, 4, op, "dt");
    require_view(a.bc, at(a.b_offset, a.ldbc), part.rows, a.d_state, a.ldbc, 4, op, "B");
    require_view(a.bc, at(a.c_offset, a.ldbc), part.rows, a.d_state, a.ldbc, 4, op, "C");
    if (a.z != nullptr) require_view(a.z, at(a.z_offset, a.ldz), part.rows, a.channels, a.ldz, 4, op, "z");
    require_view(&state_buffer(part.state), a.state_offset, a.d_state, a.channels, a.channels, 4, op,
                 "state");
    require_view(a.y, at(a.y_offset, a.ldy), part.rows, a.channels, a.ldy, 4, op, "y");
  }
  // The workgroup holds its channels' state in shared memory: as many channels (up to 16) as
  // the device's shared memory allows, and up to 8 invocations per channel updating states in
  // parallel (at most 128 invocations, the least any device supports).
  Context& context = sequence.context();
  const uint32_t d_state = static_cast<uint32_t>(a.d_state);
  const uint32_t channels_per_group =
      std::clamp<uint32_t>(context.info().max_shared_memory_bytes / (4 * d_state), 1, 16);
  const uint32_t state_lanes = std::min<uint32_t>(d_state, 8);
  const uint32_t per_dispatch = parts_per_dispatch(context, 10);
  // Specialization constant 3 fuses dt_proj; the unfused scan compiles without its code.
  const uint32_t fused = a.fused_dt.has_value();
  const KernelSpec kernel{per_dispatch > 1 ? "selective_scan_parts" : "selective_scan",
                          11,
                          23 * sizeof(uint32_t),
                          {channels_per_group, state_lanes, channels_per_group * d_state, fused},
                          per_dispatch};
  const Buffer* placeholder = &context.placeholder_buffer();
  const Buffer* z = a.z != nullptr ? a.z : placeholder;
  const Buffer* dt = a.fused_dt ? placeholder : a.dt;
  const Buffer* dt_weight = a.fused_dt ? a.fused_dt->weight : placeholder;
  const Buffer* dt_bias = a.fused_dt ? a.fused_dt->bias : placeholder;
  const GpuSelectiveScanFusedDt no_fusion;
  const GpuSelectiveScanFusedDt& f = a.fused_dt ? *a.fused_dt : no_fusion;
  for_part_groups(
      sequence, a.parts, per_dispatch, op, [&](size_t first, size_t count, CommandSequence::Staged table) {
        const uint32_t parts_at = table.at;
        const struct {
          uint32_t channels, d_state, ldu, lddt, ldbc, ldz, ldy;
          uint32_t u_offset, dt_offset, b_offset, c_offset, z_offset, y_offset, a_offset, d_offset,
              state_offset;
          uint32_t has_gate, parts_at;
          uint32_t dt_rank, dt_dtype, dt_low_offset, dt_w_offset, dt_bias_offset;
        } push{u32(a.channels, op, "channels"),
               d_state,
               u32(a.ldu, op, "ldu"),
               u32(a.lddt, op, "lddt"),
               u32(a.ldbc, op, "ldbc"),
               u32(a.ldz, op, "ldz"),
               u32(a.ldy, op, "ldy"),
               u32(static_cast<int64_t>(a.u_offset), op, "u_offset"),
               u32(static_cast<int64_t>(a.dt_offset), op, "dt_offset"),
               u32(static_cast<int64_t>(a.b_offset), op, "b_offset"),
               u32(static_cast<int64_t>(a.c_offset), op, "c_offset"),
               u32(static_cast<int64_t>(a.z_offset), op, "z_offset"),
               u32(static_cast<int64_t>(a.y_offset), op, "y_offset"),
               u32(static_cast<int64_t>(a.a_offset), op, "a_offset"),
               u32(static_cast<int64_t>(a.d_offset), op, "d_offset"),
               u32(static_cast<int64_t>(a.state_offset), op, "state_offset"),
               a.z != nullptr,
               parts_at,
               u32(f.rank, op, "dt_rank"),
               dtype_code(f.dtype),
               u32(static_cast<int64_t>(f.dt_low_offset), op, "dt_low_offset"),
               u32(static_cast<int64_t>(f.weight_offset), op, "dt_weight_offset"),
               u32(static_cast<int64_t>(f.bias_offset), op, "dt_bias_offset")};
        static_assert(sizeof push == 23 * sizeof(uint32_t));
        const std::vector<const Buffer*> buffers = part_buffers(
            context, {a.u, dt, a.bc, z, a.a_base2, a.d_skip, a.y, table.buffer, dt_weight, dt_bias},
            a.parts.subspan(first, count), per_dispatch);
        const uint32_t groups[3] = {ceil_div(a.channels, channels_per_group), static_cast<uint32_t>(count),
                                    1};
        sequence.dispatch(kernel, buffers, &push, sizeof push, groups,
                          std::string(a.fused_dt ? "dt_proj+" : "") + "selective_scan " +
                              std::to_string(count) + " parts x" + std::to_string(a.channels) + "x" +
                              std::to_string(a.d_state));
      });
}

void record_argmax(CommandSequence& sequence, const GpuArgmaxArgs& a) {
  const char* op = "vulkan argmax";
  if (a.rows <= 0) return;
  if (a.cols <= 0 || a.cols >= (int64_t{1} << 24))
    throw Error(std::string(op) + ": " + std::to_string(a.cols) + " columns; 1 to 2^24 - 1 are supported");
  require_view(a.x, a.x_offset, a.rows, a.cols, a.ldx, 4, op, "x");
  require_view(a.y, a.y_offset, 1, a.rows, 0, 4, op, "y");
  const struct {
    uint32_t rows, cols, ldx, x_offset, y_offset;
  } push{u32(a.rows, op, "rows"), u32(a.cols, op, "cols"), u32(a.ldx, op, "ldx"),
         u32(static_cast<int64_t>(a.x_offset), op, "x_offset"),
         u32(static_cast<int64_t>(a.y_offset), op, "y_offset")};
  static const KernelSpec kernel{"argmax", 2, sizeof push, {}};
  const Buffer* buffers[] = {a.x, a.y};
  uint32_t groups[3];
  spread_groups(sequence, static_cast<uint64_t>(a.rows), groups);
  sequence.dispatch(kernel, buffers, &push, sizeof push, groups,
                    "argmax " + std::to_string(a.rows) + "x" + std::to_string(a.cols));
}

void record_elementwise(CommandSequence& sequence, const GpuElementwiseArgs& a) {
  const char* op = "vulkan elementwise";
  if (a.rows <= 0 || a.cols <= 0) return;
  require_view(a.a, a.a_offset, a.rows, a.cols, a.lda, 4, op, "a");
  require_view(a.b, a.b_offset, a.rows, a.cols, a.ldb, 4, op, "b");
  require_view(a.y, a.y_offset, a.rows, a.cols, a.ldy, 4, op, "y");
  const struct {
    uint32_t rows, cols, lda, ldb, ldy, a_offset, b_offset, y_offset, op;
  } push{u32(a.rows, op, "rows"),
         u32(a.cols, op, "cols"),
         u32(a.lda, op, "lda"),
         u32(a.ldb, op, "ldb"),
         u32(a.ldy, op, "ldy"),
         u32(static_cast<int64_t>(a.a_offset), op, "a_offset"),
         u32(static_cast<int64_t>(a.b_offset), op, "b_offset"),
         u32(static_cast<int64_t>(a.y_offset), op, "y_offset"),
         static_cast<uint32_t>(a.op)};
  static const KernelSpec kernel{"elementwise", 3, sizeof push, {}};
  const Buffer* buffers[] = {a.a, a.b, a.y};
  // Columns along x; rows along y, spilling into z past the per-axis limit.
  const uint64_t row_limit = sequence.context().limits().maxComputeWorkGroupCount[1];
  const uint32_t rows_y = static_cast<uint32_t>(std::min<uint64_t>(static_cast<uint64_t>(a.rows), row_limit));
  const uint32_t groups[3] = {ceil_div(a.cols, kGroupWidth), rows_y, ceil_div(a.rows, rows_y)};
  sequence.dispatch(kernel, buffers, &push, sizeof push, groups,
                    std::string(a.op == ElementwiseOp::Add ? "add " : "silu_gate ") + std::to_string(a.rows) +
                        "x" + std::to_string(a.cols));
}

}  // namespace mb::vulkan

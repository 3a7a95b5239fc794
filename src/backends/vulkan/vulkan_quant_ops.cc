// SPDX-License-Identifier: MIT
// The recorder of the quantized matmul (vulkan_ops.h's record_quant_matmul): the GEMV for a
// decode step's few rows (quant_matmul.glsl), or for more rows the activations quantized once
// (quant_rows.comp) and the tiled GEMM per piece (quant_matmul_tiled.comp). See the shaders for
// the arithmetic, which is the CPU's (src/ops/quant_matmul.h).
#include <algorithm>
#include <string>

#include "backends/vulkan/vulkan_op_util.h"
#include "backends/vulkan/vulkan_ops.h"
#include "core/error.h"
#include "ops/quant_matmul.h"

namespace mb::vulkan {
namespace {

constexpr uint32_t kGemvMaxRows = 8;     // the GEMV's largest kRows
constexpr uint32_t kTiledRowsPer = 8;    // kRowsPer of quant_matmul_tiled.comp
constexpr uint32_t kTiledMaxGroups = 8;  // its row groups (local y): tiles of up to 64 rows

// The weight format as the shaders' kType names it (quant_format.glsl).
uint32_t type_code(DType dtype) {
  switch (dtype) {
    case DType::Q8_0:
      return 0;
    case DType::Q4_0:
      return 1;
    case DType::Q4_K:
      return 2;
    case DType::Q6_K:
      return 3;
    default:
      throw Error("vulkan quantized matmul: " + std::string(dtype_name(dtype)) + " is not a quantized dtype");
  }
}

// Shared memory of quant_matmul_tiled.comp with `row_groups` (the largest over the formats): the
// panel's level words, the tile rows' levels (rows padded to 65 words), scales and sums, and the
// lanes' scales.
uint64_t tiled_shared_bytes(uint32_t row_groups) {
  const uint64_t rows = uint64_t{row_groups} * kTiledRowsPer;
  return 4 * (64 * 16 + rows * (65 + 8 + 16) + 8 * 16 + 16 + 16 * 16 + 8 * 16);
}

// The most row groups the device's workgroup limits allow, or 0 when not even one fits (then the
// GEMV serves every row count).
uint32_t tiled_row_groups(const Context& context) {
  const VkPhysicalDeviceLimits& limits = context.limits();
  for (uint32_t groups = kTiledMaxGroups; groups >= 1; groups /= 2) {
    if (16 * groups <= limits.maxComputeWorkGroupInvocations && groups <= limits.maxComputeWorkGroupSize[1] &&
        16 <= limits.maxComputeWorkGroupSize[0] &&
        tiled_shared_bytes(groups) <= limits.maxComputeSharedMemorySize)
      return groups;
  }
  return 0;
}

uint32_t next_power_of_two(int64_t value) {
  uint32_t p = 1;
  while (p < value) p *= 2;
  return p;
}

void check_quant_matmul(const GpuQuantMatmulArgs& a, const char* op) {
  const int64_t block = dtype_block_weights(a.dtype);
  if (a.cols <= 0 || a.cols % block != 0)
    throw Error(std::string(op) + ": " + std::string(dtype_name(a.dtype)) +
                " weights need K to be a multiple of " + std::to_string(block) + ", got " +
                std::to_string(a.cols));
  if (a.softplus && a.accumulate)
    throw Error(std::string(op) + ": softplus cannot be combined with accumulate");
  require_view(a.x, a.x_offset, a.m, a.cols, a.ldx, 4, op, "x");
  if (a.norm_weight != nullptr)
    require_view(a.norm_weight, a.norm_offset, 1, a.cols, 0, 4, op, "norm weight");
  const uint64_t tile_words = kQuantPanel * dtype_block_bytes(a.dtype) / 4;
  int64_t next_row = 0;
  for (const GpuQuantPiece& piece : a.pieces) {
    if (piece.first_row != next_row || piece.first_row % kQuantPanel != 0 || piece.rows <= 0)
      throw Error(std::string(op) +
                  ": the pieces of the weights must be consecutive runs of whole 16-row panels");
    next_row += piece.rows;
    const int64_t panels = (piece.rows + kQuantPanel - 1) / kQuantPanel;
    require_view(piece.w, 0, 1, static_cast<int64_t>(panels * (a.cols / block) * tile_words), 0, 4, op,
                 "the packed weights");
    if (a.bias != nullptr)
      require_view(a.bias, a.bias_offset + static_cast<uint64_t>(piece.first_row), 1, piece.rows, 0, 4, op,
                   "bias");
    require_view(a.y, a.y_offset + static_cast<uint64_t>(piece.first_row), a.m, piece.rows, a.ldy, 4, op,
                 "y");
  }
}

std::string shape_label(const char* name, const GpuQuantMatmulArgs& a, int64_t rows) {
  return std::string(name) + " " + std::string(dtype_name(a.dtype)) +
         (a.norm_weight != nullptr ? " rms_norm+" : " ") + std::to_string(a.m) + "x" + std::to_string(rows) +
         "x" + std::to_string(a.cols);
}

// Decode: one GEMV dispatch per piece, the rows quantized inside it.
void record_gemv(CommandSequence& sequence, const GpuQuantMatmulArgs& a, const char* op) {
  Context& context = sequence.context();
  const uint32_t rows_per_group = std::min(kGemvMaxRows, next_power_of_two(a.m));
  if (ceil_div(static_cast<uint64_t>(a.m), rows_per_group) > context.limits().maxComputeWorkGroupCount[1])
    throw Error(std::string(op) + ": " + std::to_string(a.m) + " rows exceed the device's workgroup counts");
  const Buffer* norm = a.norm_weight != nullptr ? a.norm_weight : &context.placeholder_buffer();
  const Buffer* bias = a.bias != nullptr ? a.bias : &context.placeholder_buffer();
  const KernelSpec kernel{context.subgroup_ops() ? "quant_matmul_subgroup" : "quant_matmul",
                          5,
                          14 * sizeof(uint32_t),
                          {a.norm_weight != nullptr, type_code(a.dtype), rows_per_group}};
  for (const GpuQuantPiece& piece : a.pieces) {
    const struct {
      uint32_t m, n, k, ldx, ldy, x_offset, y_offset, bias_offset, w_offset, has_bias, accumulate, softplus,
          norm_offset;
      float norm_eps;
    } push{u32(a.m, op, "m"),
           u32(piece.rows, op, "rows"),
           u32(a.cols, op, "cols"),
           u32(a.ldx, op, "ldx"),
           u32(a.ldy, op, "ldy"),
           u32(static_cast<int64_t>(a.x_offset), op, "x_offset"),
           u32(static_cast<int64_t>(a.y_offset) + piece.first_row, op, "y_offset"),
           u32(static_cast<int64_t>(a.bias_offset) + piece.first_row, op, "bias_offset"),
           0,
           a.bias != nullptr,
           a.accumulate,
           a.softplus,
           u32(static_cast<int64_t>(a.norm_offset), op, "norm_offset"),
           a.norm_eps};
    static_assert(sizeof push == 14 * sizeof(uint32_t));
    const Buffer* buffers[] = {a.x, piece.w, bias, a.y, norm};
    const uint32_t groups[3] = {ceil_div(static_cast<uint64_t>(piece.rows), kQuantPanel),
                                ceil_div(static_cast<uint64_t>(a.m), rows_per_group), 1};
    sequence.dispatch(kernel, buffers, &push, sizeof push, groups,
                      shape_label("quant_matmul", a, piece.rows));
  }
}

// Prefill: the rows quantized once into the scratch buffer, then one tiled GEMM per piece.
void record_tiled(CommandSequence& sequence, const GpuQuantMatmulArgs& a, uint32_t row_groups,
                  const char* op) {
  Context& context = sequence.context();
  const int64_t K = a.cols, block = activation_block(a.dtype);
  const uint64_t q_words = static_cast<uint64_t>(a.m * (K / 4)),
                 dx_words = static_cast<uint64_t>(a.m * (K / block));
  const uint64_t sum_words = static_cast<uint64_t>(a.m * (K / 16));
  const uint64_t words = q_words + dx_words + sum_words;
  if (words * 4 > context.info().max_storage_buffer_bytes)
    throw Error(std::string(op) + ": the quantized activations of " + std::to_string(a.m) + " rows of " +
                std::to_string(K) + " exceed what one storage binding spans on " + context.info().name +
                "; run the round in smaller pieces (a smaller --chunk)");
  const Buffer& scratch = sequence.scratch(words * 4);
  const uint32_t q_offset = 0, dx_offset = u32(static_cast<int64_t>(q_words), op, "dx_offset"),
                 sum_offset = u32(static_cast<int64_t>(q_words + dx_words), op, "sum_offset");
  {
    const struct {
      uint32_t m, k, ldx, x_offset, norm_offset;
      float norm_eps;
      uint32_t q_offset, dx_offset, sum_offset;
    } push{u32(a.m, op, "m"),
           u32(K, op, "cols"),
           u32(a.ldx, op, "ldx"),
           u32(static_cast<int64_t>(a.x_offset), op, "x_offset"),
           u32(static_cast<int64_t>(a.norm_offset), op, "norm_offset"),
           a.norm_eps,
           q_offset,
           dx_offset,
           sum_offset};
    const Buffer* norm = a.norm_weight != nullptr ? a.norm_weight : &context.placeholder_buffer();
    const Buffer* buffers[] = {a.x, norm, &scratch};
    const KernelSpec kernel{
        "quant_rows", 3, sizeof push, {a.norm_weight != nullptr, static_cast<uint32_t>(block)}};
    uint32_t groups[3];
    spread_groups(sequence, static_cast<uint64_t>(a.m), groups);
    sequence.dispatch(kernel, buffers, &push, sizeof push, groups,
                      std::string("quant_rows ") + (a.norm_weight != nullptr ? "rms_norm+" : "") +
                          std::to_string(a.m) + "x" + std::to_string(K));
  }
  const uint32_t tile_rows = row_groups * kTiledRowsPer;
  const uint64_t row_tiles = ceil_div(static_cast<uint64_t>(a.m), tile_rows);
  if (row_tiles > context.limits().maxComputeWorkGroupCount[1])
    throw Error(std::string(op) + ": " + std::to_string(a.m) + " rows exceed the device's workgroup counts");
  const Buffer* bias = a.bias != nullptr ? a.bias : &context.placeholder_buffer();
  const KernelSpec kernel{"quant_matmul_tiled", 4, 13 * sizeof(uint32_t), {type_code(a.dtype), row_groups}};
  for (const GpuQuantPiece& piece : a.pieces) {
    const struct {
      uint32_t m, n, k, ldy, y_offset, bias_offset, w_offset, has_bias, accumulate, softplus, q_offset,
          dx_offset, sum_offset;
    } push{u32(a.m, op, "m"),
           u32(piece.rows, op, "rows"),
           u32(K, op, "cols"),
           u32(a.ldy, op, "ldy"),
           u32(static_cast<int64_t>(a.y_offset) + piece.first_row, op, "y_offset"),
           u32(static_cast<int64_t>(a.bias_offset) + piece.first_row, op, "bias_offset"),
           0,
           a.bias != nullptr,
           a.accumulate,
           a.softplus,
           q_offset,
           dx_offset,
           sum_offset};
    static_assert(sizeof push == 13 * sizeof(uint32_t));
    const Buffer* buffers[] = {&scratch, piece.w, bias, a.y};
    const uint32_t groups[3] = {ceil_div(static_cast<uint64_t>(piece.rows), kQuantPanel),
                                static_cast<uint32_t>(row_tiles), 1};
    sequence.dispatch(kernel, buffers, &push, sizeof push, groups,
                      shape_label("quant_matmul_tiled", a, piece.rows));
  }
}

}  // namespace

void record_quant_matmul(CommandSequence& sequence, const GpuQuantMatmulArgs& a) {
  const char* op = "vulkan quantized matmul";
  type_code(a.dtype);
  if (a.m <= 0 || a.pieces.empty()) return;
  check_quant_matmul(a, op);
  const uint64_t panels =
      ceil_div(static_cast<uint64_t>(a.pieces.back().first_row + a.pieces.back().rows), kQuantPanel);
  if (panels > sequence.context().limits().maxComputeWorkGroupCount[0])
    throw Error(std::string(op) + ": " + std::to_string(panels) +
                " panels of outputs exceed the device's workgroup counts");
  const uint32_t row_groups = a.m >= kMatmulTiledMinRows ? tiled_row_groups(sequence.context()) : 0;
  if (row_groups > 0)
    record_tiled(sequence, a, row_groups, op);
  else
    record_gemv(sequence, a, op);
}

}  // namespace mb::vulkan

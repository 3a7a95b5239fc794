// SPDX-License-Identifier: MIT
// The GPU counterparts of the CPU ops, recorded into a CommandSequence.
//
// Each takes views into device buffers (a buffer and an element offset, with row strides as the
// CPU ops take pointers and strides) and records one dispatch (the batched conv and scans: one
// per kMaxGpuParts sequences; the Mamba-2/3 scans' chunked order and Mamba-3's preparation a few
// more). On a device with an exact fma
// (Context::exact_fma) every op gives the CPU kernel's bits; see shaders/mb_math.glsl for how.
// Arguments are checked on the host before anything is recorded: a view that would reach past
// its buffer, or a shape the device cannot dispatch, throws mb::Error.
#pragma once

#include <cstdint>
#include <optional>
#include <span>

#include "backends/backend.h"
#include "backends/vulkan/vulkan_buffer.h"
#include "backends/vulkan/vulkan_commands.h"
#include "core/dtype.h"

namespace mb::vulkan {

// y = x W^T (+ bias), then softplus or y += result: ops/matmul.h with W packed by pack_weights.
// With norm_weight, x's rows are RMS-normalized first (ops/rms_norm.h over the cols axis, eps
// norm_eps), with the bits of record_rms_norm followed by the plain product, in one dispatch.
// Few rows (decode) take a shader that reads the weights once per four rows; more than
// kMatmulTiledMinRows - 1 rows take a tiled one that stages slices of x and W in shared memory
// and reads the weights once per tile of up to 128 rows. Both give the same bits.
struct GpuMatmulArgs {
  const Buffer* x = nullptr;  // [m, ldx] floats from x_offset
  uint64_t x_offset = 0;
  int64_t ldx = 0;
  int64_t m = 0;
  const Buffer* w = nullptr;  // packed panels of `rows` x `cols` in `dtype`, from element w_offset
  uint64_t w_offset = 0;      // in elements of dtype (even for bf16 and f16 is not required)
  DType dtype = DType::F32;
  int64_t rows = 0;              // N, outputs
  int64_t cols = 0;              // K, inputs
  const Buffer* bias = nullptr;  // [rows] floats from bias_offset, or null
  uint64_t bias_offset = 0;
  const Buffer* y = nullptr;  // [m, ldy] floats from y_offset
  uint64_t y_offset = 0;
  int64_t ldy = 0;
  bool accumulate = false;
  bool softplus = false;
  const Buffer* norm_weight = nullptr;  // [cols] floats from norm_offset, or null for no norm
  uint64_t norm_offset = 0;
  float norm_eps = 1e-5f;
};

// The fewest rows that record_matmul hands to the tiled shader.
inline constexpr int64_t kMatmulTiledMinRows = 9;

// y = x W^T (+ bias), then softplus or y += result, with W in the quantized tiles of
// ops/quant_matmul.h (Q8_0, Q4_0, Q4_K, Q6_K) exactly as the CPU packs them, cut into pieces of
// whole 16-row panels (each its own buffer, its outputs at y's columns from first_row); with
// norm_weight, x's rows are RMS-normalized first, as in GpuMatmulArgs. Each row is quantized as
// the CPU quantizes it and every output is the CPU's chain of block terms, so the results are the
// CPU's bits. Fewer than kMatmulTiledMinRows rows take the GEMV, which quantizes its rows itself
// (one dispatch per piece); more are quantized once into the recording's scratch buffer and take
// a tiled GEMM that decodes each weight block once per tile of up to 64 rows.
struct GpuQuantPiece {
  const Buffer* w = nullptr;  // the piece's tiles from word 0
  int64_t first_row = 0;      // a multiple of 16
  int64_t rows = 0;
};
struct GpuQuantMatmulArgs {
  const Buffer* x = nullptr;  // [m, ldx] floats from x_offset
  uint64_t x_offset = 0;
  int64_t ldx = 0;
  int64_t m = 0;
  DType dtype = DType::Q8_0;
  int64_t cols = 0;                       // K, a multiple of the dtype's block
  std::span<const GpuQuantPiece> pieces;  // consecutive, from row 0
  const Buffer* bias = nullptr;           // [rows] floats from bias_offset, or null
  uint64_t bias_offset = 0;
  const Buffer* y = nullptr;  // [m, ldy] floats from y_offset
  uint64_t y_offset = 0;
  int64_t ldy = 0;
  bool accumulate = false;
  bool softplus = false;
  const Buffer* norm_weight = nullptr;  // [cols] floats from norm_offset, or null for no norm
  uint64_t norm_offset = 0;
  float norm_eps = 1e-5f;
};

// ops/rms_norm.h; y may be the same view as x (in place).
struct GpuRmsNormArgs {
  const Buffer* x = nullptr;  // [rows, ldx]
  uint64_t x_offset = 0;
  int64_t ldx = 0;
  int64_t rows = 0;
  int64_t dim = 0;
  const Buffer* weight = nullptr;  // [dim]
  uint64_t weight_offset = 0;
  float eps = 1e-5f;
  const Buffer* y = nullptr;  // [rows, ldy]
  uint64_t y_offset = 0;
  int64_t ldy = 0;
};

// ops/rms_norm.h applied to several disjoint column ranges of each row, each normalized over its
// own width with its own weights, in one dispatch: the same bits as one rms_norm per segment.
// FalconMamba normalizes dt_low, B and C of x_proj's output this way, in place.
inline constexpr int kMaxRmsNormSegments = 4;
struct GpuRmsNormSegment {
  int64_t column = 0;  // first column of the segment in x's and y's rows
  int64_t dim = 0;
  uint64_t weight_offset = 0;  // the segment's [dim] weights
};
struct GpuRmsNormSegmentsArgs {
  const Buffer* x = nullptr;  // [rows, ldx]
  uint64_t x_offset = 0;
  int64_t ldx = 0;
  int64_t rows = 0;
  const Buffer* weight = nullptr;
  float eps = 1e-5f;
  const Buffer* y = nullptr;  // [rows, ldy]; may be x's view
  uint64_t y_offset = 0;
  int64_t ldy = 0;
  std::span<const GpuRmsNormSegment> segments;  // 1 to kMaxRmsNormSegments, not overlapping
};

// The batched ops run several sequences (parts of a round, backends/backend.h's Part) in one
// dispatch: each part is a run of rows of the op's row buffers and the sequence's own state. The state
// buffers are reached through an array binding of up to kMaxGpuParts buffers, so a round of more parts takes
// ceil(parts / kMaxGpuParts) dispatches; on a device without shaderStorageBufferArrayDynamicIndexing
// (Context::buffer_arrays) each part takes its own. The parts' rows are staged into the sequence's parameter
// buffer at record time. Parts must name distinct state buffers (each is read and updated).
inline constexpr int kMaxGpuParts = 16;
// The device buffer of a part's state (its fixed region): the state must live on this device (a
// VulkanState, made by a VulkanBackend); throws mb::Error for any other.
const Buffer& state_buffer(const StateStorage* state);

// ops/causal_conv.h over the parts (each part's history read and updated).
struct GpuCausalConvArgs {
  const Buffer* x = nullptr;  // row r at x_offset + r * ldx, `channels` wide
  uint64_t x_offset = 0;
  int64_t ldx = 0;
  int64_t channels = 0;
  int kernel_size = 4;
  const Buffer* weight = nullptr;  // [K, channels] tap-major
  uint64_t weight_offset = 0;
  const Buffer* bias = nullptr;  // [channels] or null
  uint64_t bias_offset = 0;
  uint64_t history_offset = 0;  // each part's history: [K-1, channels] of its state from here
  const Buffer* y = nullptr;    // row r at y_offset + r * ldy
  uint64_t y_offset = 0;
  int64_t ldy = 0;
  std::span<const Part> parts;  // the states are VulkanStates
};

// ops/selective_scan.h over the parts (each part's state read and updated). B and C rows live
// in one buffer (Mamba-1 keeps both in x_proj's output), at b_offset and c_offset with stride
// ldbc. Row views are addressed by round row as in GpuCausalConvArgs.
//
// With fused_dt the scan runs dt_proj itself and `dt` is not read: per channel c and row,
// dt = softplus(dt_low[row] W_dt[c]^T + dt_bias[c]) with the bits of record_matmul (and of the
// CPU's matmul) for the same packed weights. dt_low is [rows, dt_rank] of the bc buffer from
// dt_low_offset with stride ldbc, the first columns of x_proj's output. The shader parks each dt
// in y (the element its output later replaces), so y must not overlap the inputs.
struct GpuSelectiveScanFusedDt {
  const Buffer* weight = nullptr;  // packed panels of `channels` x `rank` in `dtype` from weight_offset
  uint64_t weight_offset = 0;      // in elements of dtype
  DType dtype = DType::F32;
  int64_t rank = 0;              // R, inputs per channel
  const Buffer* bias = nullptr;  // [channels] floats from bias_offset (required)
  uint64_t bias_offset = 0;
  uint64_t dt_low_offset = 0;  // of bc
};
struct GpuSelectiveScanArgs {
  int64_t channels = 0;
  int64_t d_state = 0;
  const Buffer* u = nullptr;  // [rows, ldu]
  uint64_t u_offset = 0;
  int64_t ldu = 0;
  const Buffer* dt = nullptr;  // [rows, lddt], softplus applied; unused (may be null) with fused_dt
  uint64_t dt_offset = 0;
  int64_t lddt = 0;
  const Buffer* bc = nullptr;  // B: [rows, ldbc] from b_offset; C: [rows, ldbc] from c_offset
  uint64_t b_offset = 0;
  uint64_t c_offset = 0;
  int64_t ldbc = 0;
  const Buffer* z = nullptr;  // [rows, ldz] gate inputs, or null for no gate
  uint64_t z_offset = 0;
  int64_t ldz = 0;
  const Buffer* a_base2 = nullptr;  // [N, channels]
  uint64_t a_offset = 0;
  const Buffer* d_skip = nullptr;  // [channels]
  uint64_t d_offset = 0;
  uint64_t state_offset = 0;  // each part's state: [N, channels] of its buffer from here
  const Buffer* y = nullptr;  // [rows, ldy]
  uint64_t y_offset = 0;
  int64_t ldy = 0;
  std::span<const Part> parts;                      // the states are VulkanStates
  std::optional<GpuSelectiveScanFusedDt> fused_dt;  // dt_proj inside the scan, or none
};

enum class ElementwiseOp : uint32_t {
  Add = 0,      // y = a + b (the residual add)
  SiluGate = 1  // y = a * silu(b) (the gate y * silu(z))
};

// y may be the same view as a or b.
struct GpuElementwiseArgs {
  ElementwiseOp op = ElementwiseOp::Add;
  int64_t rows = 0;
  int64_t cols = 0;
  const Buffer* a = nullptr;  // [rows, lda]
  uint64_t a_offset = 0;
  int64_t lda = 0;
  const Buffer* b = nullptr;  // [rows, ldb]
  uint64_t b_offset = 0;
  int64_t ldb = 0;
  const Buffer* y = nullptr;  // [rows, ldy]
  uint64_t y_offset = 0;
  int64_t ldy = 0;
};

// Per row of x: the lowest index of the largest value, NaNs skipped (0 for a row of NaNs), as a
// float in y[row]. Equals std::max_element's index on rows without NaNs (see greedy_index).
struct GpuArgmaxArgs {
  const Buffer* x = nullptr;  // [rows, ldx]
  uint64_t x_offset = 0;
  int64_t ldx = 0;
  int64_t rows = 0;
  int64_t cols = 0;           // below 2^24, so every index is exact as a float
  const Buffer* y = nullptr;  // [rows]
  uint64_t y_offset = 0;
};

// The largest d_state of the Mamba-2 and Mamba-3 scans (as on the CPU).
inline constexpr int64_t kMaxScanStates = 256;

// ops/mamba2_scan.h over the parts (each part's SSM state [H, N, P] from state_offset read and
// updated), in the sequential order or the chunked SSD order (chunk positions per chunk; the
// CPU's ssd_chunk_for applied by the caller), with the CPU kernel's bits in either. dt is read
// raw and replaced by the clamped softplus. Row views are addressed by round row as in
// GpuCausalConvArgs. Vectors (dt_bias, a_base2, a, d_skip) are [H] floats from their offsets
// (d_skip [H * P] with d_per_channel).
struct GpuMamba2ScanArgs {
  int64_t n_heads = 0, headdim = 0, d_state = 0, n_groups = 0;
  const Buffer* xbc = nullptr;  // [rows, ldxbc]: x [H * P] | B [G * N] | C [G * N]
  uint64_t xbc_offset = 0;
  int64_t ldxbc = 0;
  const Buffer* dt = nullptr;  // [rows, lddt]
  uint64_t dt_offset = 0;
  int64_t lddt = 0;
  const Buffer* y = nullptr;  // [rows, ldy]
  uint64_t y_offset = 0;
  int64_t ldy = 0;
  const Buffer* dt_bias = nullptr;
  uint64_t dt_bias_offset = 0;
  const Buffer* a_base2 = nullptr;  // A log2(e), the sequential order's rate
  uint64_t a_base2_offset = 0;
  const Buffer* a = nullptr;  // A, the chunked order's log-decay rate
  uint64_t a_offset = 0;
  const Buffer* d_skip = nullptr;
  uint64_t d_offset = 0;
  bool d_per_channel = false;
  float dt_min = 0.0f, dt_max = 0.0f;
  uint64_t state_offset = 0;
  std::span<const Part> parts;  // the states are VulkanStates
  bool chunked = false;
  int64_t chunk = 256;
};

// ops/gated_rms_norm.h; out may be y's view (in place).
struct GpuGatedRmsNormArgs {
  const Buffer* y = nullptr;  // [rows, ldy]
  uint64_t y_offset = 0;
  int64_t ldy = 0;
  const Buffer* z = nullptr;  // [rows, ldz]
  uint64_t z_offset = 0;
  int64_t ldz = 0;
  int64_t rows = 0, dim = 0, group_size = 0;
  const Buffer* weight = nullptr;  // [dim], or null for the gate alone
  uint64_t weight_offset = 0;
  float eps = 1e-5f;
  const Buffer* out = nullptr;  // [rows, ldout]
  uint64_t out_offset = 0;
  int64_t ldout = 0;
};

// ops/mamba3_scan.h over the parts (each part's state block, Mamba3StateLayout from
// state_offset, read and updated), each part in the sequential order or the chunked SSD order
// (chunked[i]), with the CPU kernel's bits in either. B, C and the angle columns of proj are
// replaced by their BCNorm outputs and velocities. Vectors are floats from their offsets:
// dt_bias and d_skip [H], b_bias and c_bias [H, N], b_norm and c_norm [N], gate_norm [H * P] (or
// null for the plain gate). Needs shaderFloat64 (the RoPE phases are updated in f64).
struct GpuMamba3ScanArgs {
  int64_t n_heads = 0, headdim = 0, d_state = 0, n_groups = 0, n_angles = 0;
  const Buffer* proj = nullptr;  // [rows, ldp]: z | x | B | C | dd_dt | dd_A | trap | angles
  uint64_t proj_offset = 0;
  int64_t ldp = 0;
  const Buffer* y = nullptr;  // [rows, ldy]
  uint64_t y_offset = 0;
  int64_t ldy = 0;
  const Buffer *dt_bias = nullptr, *b_bias = nullptr, *c_bias = nullptr, *b_norm = nullptr, *c_norm = nullptr,
               *d_skip = nullptr, *gate_norm = nullptr;
  uint64_t dt_bias_offset = 0, b_bias_offset = 0, c_bias_offset = 0, b_norm_offset = 0, c_norm_offset = 0,
           d_offset = 0, gate_offset = 0;
  float a_floor = 1e-4f, eps = 1e-5f;
  uint64_t state_offset = 0;
  std::span<const Part> parts;         // the states are VulkanStates
  std::span<const uint8_t> chunked{};  // per part: nonzero for the chunked order
  int64_t chunk = 64;
  bool boundary_fold = true;
};

void record_matmul(CommandSequence& sequence, const GpuMatmulArgs& args);
void record_quant_matmul(CommandSequence& sequence, const GpuQuantMatmulArgs& args);
void record_argmax(CommandSequence& sequence, const GpuArgmaxArgs& args);
void record_rms_norm(CommandSequence& sequence, const GpuRmsNormArgs& args);
void record_rms_norm_segments(CommandSequence& sequence, const GpuRmsNormSegmentsArgs& args);
void record_causal_conv_silu(CommandSequence& sequence, const GpuCausalConvArgs& args);
void record_selective_scan(CommandSequence& sequence, const GpuSelectiveScanArgs& args);
void record_elementwise(CommandSequence& sequence, const GpuElementwiseArgs& args);
void record_mamba2_scan(CommandSequence& sequence, const GpuMamba2ScanArgs& args);
void record_gated_rms_norm(CommandSequence& sequence, const GpuGatedRmsNormArgs& args);
void record_mamba3_scan(CommandSequence& sequence, const GpuMamba3ScanArgs& args);

}  // namespace mb::vulkan

// SPDX-License-Identifier: MIT
// The Vulkan backend: the ops of backends/backend.h recorded as compute dispatches (vulkan_ops.h).
//
// Weights are uploaded once, in the packed panels (or quantized tiles) the CPU matmul reads and in
// their dtype, cut into runs of whole panels that one storage binding can span (lavapipe allows 128 MiB;
// an f32 130m LM head is 154 MB); each output's fma chain lives in one panel, so the cut changes
// no bit. Each sequence's state lives in its own device buffers (VulkanState) between calls and
// keeps the context alive, so states may outlive the model and be freed in any order.
// Activations live in the caller's VulkanStream, sized by the largest round (so by the chunk).
//
// A round is recorded into one command buffer. When the next round has the same key (the model
// names its shape: rows, states, outputs), the recording is replayed and the op calls only stage
// their host inputs (embedding rows, features), so a steady decode loop records once and then
// writes its inputs, submits and reads its outputs. Fusions: a matmul's RMSNorm prologue runs
// inside the product's dispatches; a decode-sized scan (< kMatmulTiledMinRows rows) runs dt_proj
// itself, while a prefill round keeps dt_proj as its own tiled GEMM, parallel over rows, rather
// than adding its chains to the scan's walk over time. Both give the CPU's bits.
//
// The conv and the scans reach up to kMaxGpuParts (16) sequences' state buffers through a
// descriptor array, so a decode step's layer is the same dispatches at any batch up to 16 (five
// for Mamba-1 and Mamba-2, four for Mamba-3); a device without
// shaderStorageBufferArrayDynamicIndexing takes one dispatch per sequence.
//
// Mamba-2 and Mamba-3 (vulkan_mamba2_ops.cc, vulkan_mamba3_ops.cc) run both scan orders with the
// CPU's bits: the sequential one (a workgroup per head, its state in registers) and the chunked
// SSD form (the products of every chunk and head at once, vulkan_ssd.h); --scan picks the same
// order per part as on the CPU. Mamba-3 needs shaderFloat64. Quantized weights (Q8_0, Q4_0,
// Q4_K, Q6_K) stay in the CPU's tiles on the device and their products give the CPU's bits
// (record_quant_matmul). The hybrids' attention and MLP ops are not implemented here yet:
// why_unsupported says so, and a model refuses to load onto the device.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "backends/backend.h"
#include "backends/vulkan/vulkan_context.h"

namespace mb::vulkan {

class VulkanBackend final : public Backend {
 public:
  // `max_piece_bytes` (0 = the device's binding limit) caps the pieces weight matrices are cut
  // into; tests lower it to cut small matrices.
  explicit VulkanBackend(const ContextOptions& options, uint64_t max_piece_bytes = 0);
  ~VulkanBackend() override;

  std::string description() const override;
  std::string why_unsupported(const OpQuery& query) const override;

  std::unique_ptr<Storage> upload_matrix(const WeightMatrix& host) const override;
  std::unique_ptr<Storage> upload_floats(const float* host, int64_t count) const override;
  std::unique_ptr<StateStorage> new_state(const StateShape& shape) const override;
  std::unique_ptr<StateStorage> adopt_state(const StateShape& shape, int64_t positions,
                                            std::span<const float> host) const override;
  const void* state_home() const override;

  std::unique_ptr<Stream> new_stream() const override;
  bool owns(const Stream& stream) const override;
  void begin_round(Stream& stream, const ComputeContext& ctx, std::span<const uint64_t> key) const override;
  void end_round(Stream& stream) const override;
  void cancel_round(Stream& stream) const override;
  void read_rows(Stream& stream, View from, int64_t rows, int64_t cols, float* host) const override;

  void matmul(Stream& stream, const MatmulOp& op) const override;
  void rms_norm(Stream& stream, const RmsNormOp& op) const override;
  void causal_conv(Stream& stream, const CausalConvOp& op) const override;
  void selective_scan(Stream& stream, const SelectiveScanOp& op) const override;
  void mamba2_scan(Stream& stream, const Mamba2ScanOp& op) const override;
  void gated_rms_norm(Stream& stream, const GatedRmsNormOp& op) const override;
  void mamba3_scan(Stream& stream, const Mamba3ScanOp& op) const override;
  void embed(Stream& stream, const EmbedOp& op) const override;
  void write_rows(Stream& stream, const WriteRowsOp& op) const override;
  void argmax(Stream& stream, const ArgmaxOp& op) const override;
  void append_rows(Stream& stream, const AppendRowsOp& op) const override;
  void attention(Stream& stream, const AttentionOp& op) const override;
  void rope(Stream& stream, const RopeOp& op) const override;
  void glu(Stream& stream, const GluOp& op) const override;
  void scale(Stream& stream, const ScaleOp& op) const override;
  void moe(Stream& stream, const MoeOp& op) const override;
  void short_conv(Stream& stream, const ShortConvOp& op) const override;
  void gated_delta_net(Stream& stream, const GatedDeltaNetOp& op) const override;

  // The device context, for tests that read the validation layer's reports.
  Context& context() const;
  // Recordings made through `stream` so far (a steady decode loop adds none after its first step).
  static int64_t recordings(const Stream& stream);
  // The phase of each dispatch of the stream's current recording, in order.
  static std::vector<PhaseId> recorded_phases(const Stream& stream);

  struct Shared;

 private:
  std::shared_ptr<Shared> shared_;
  uint64_t max_piece_bytes_ = 0;
};

}  // namespace mb::vulkan

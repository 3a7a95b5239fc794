// SPDX-License-Identifier: MIT
// The CPU backend: every op calls the CPU kernels of src/ops unchanged, at once (there is nothing
// to record), with the threads and instruction set of the round's ComputeContext. Weights are read
// in place from the packed host matrices; states are HostStates; a fusion an op offers runs as its
// pieces, whose bits the fused device kernels are pinned to.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "backends/backend.h"

namespace mb {

class CpuBackend final : public Backend {
 public:
  std::string description() const override { return "cpu"; }
  std::string why_unsupported(const OpQuery& query) const override;

  std::unique_ptr<Storage> upload_matrix(const WeightMatrix& host) const override;
  std::unique_ptr<Storage> upload_floats(const float* host, int64_t count) const override;
  std::unique_ptr<StateStorage> new_state(const StateShape& shape) const override;
  std::unique_ptr<StateStorage> adopt_state(const StateShape& shape, int64_t positions,
                                            std::span<const float> host) const override;
  const void* state_home() const override { return nullptr; }

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

  // ScanForm::Auto on the CPU: whether a Mamba-3 run of `positions` positions of one sequence
  // takes the chunked form with SSD chunks of `ssd_chunk` positions. (Mamba-2's Auto is always
  // the sequential form here: it is as fast or faster at every shape measured.)
  static bool mamba3_prefers_chunked(int64_t positions, int64_t ssd_chunk);
};

}  // namespace mb

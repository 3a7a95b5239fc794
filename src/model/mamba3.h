// Mamba-3 SISO (the mamba_ssm Mamba3 mixer inside MambaLMHeadModel; spec mamba3-siso.md).
//
// Each layer: RMSNorm, in_proj (one GEMM over every row of the round), the mixer of
// ops/mamba3_scan.h per (sequence, head), out_proj with the residual add. Per-sequence state per
// layer is the Mamba3StateLayout block: SSM [H, N, P], K [H, N], V [H, P], angles [H, max(na, 1)].
#pragma once

#include <memory>
#include <vector>

#include "model/model.h"
#include "ops/mamba3_scan.h"

namespace mb {

struct Mamba3Layer {
  const float* norm = nullptr;  // [d_model]
  WeightMatrix in_proj;         // [in_proj_dim, d_model], rows z | x | B | C | dd_dt | dd_A | trap | angles
  WeightMatrix out_proj;        // [d_model, d_inner]
  Mamba3ScanParams scan;        // biases, norms, D and sizes of this layer's mixer
};

class Mamba3Model : public Model {
 public:
  Mamba3Model(const ModelConfig& config, std::shared_ptr<const TensorSet> tensors,
              const LoadOptions& options);

  // The parts of each layer's state (state_layout()), in this order, with the offsets of
  // ops/mamba3_scan.h's Mamba3StateLayout: the scan takes the layer's whole block.
  static constexpr size_t kSsmPart = 0, kKPart = 1, kVPart = 2, kAnglePart = 3;
  // The profiling phase of the whole mixer op, named here for benchmarks that time it alone.
  static constexpr std::string_view kMixerPhaseName = "mixer (bcnorm+rope+scan+gate)";
  int64_t n_rope_angles() const { return n_angles_; }
  int64_t in_proj_dim() const { return layers_[0].scan.proj_width(); }
  const std::vector<Mamba3Layer>& layers() const { return layers_; }

  // Whether a round of `positions` positions of one sequence runs the chunked SSD form when the
  // caller asks for ScanForm::Auto with SSD chunks of `ssd_chunk` positions.
  static bool auto_prefers_chunked(int64_t positions, int64_t ssd_chunk);

  // Test-only: drops the §10.3 boundary fold from chunked windows (see Mamba3ScanParams).
  void disable_boundary_fold_for_testing();

 protected:
  void forward_layers(const ComputeContext& ctx, std::span<const Rows> rows, float* hidden, int64_t m,
                      const ForwardOptions& options, Workspace& workspace, float* scratch) const override;
  size_t scratch_floats_per_row() const override;
  std::span<const std::string_view> layer_phase_names() const override;

 private:
  std::vector<Mamba3Layer> layers_;
  int64_t n_angles_ = 0;
};

// num_rope_angles of spec §1.2: floor(floor(d_state * rope_fraction) / 2), in f32 as the reference.
int64_t mamba3_rope_angles(int64_t d_state, double rope_fraction);

}  // namespace mb

// SPDX-License-Identifier: MIT
// The Mamba-3 SISO mixer (the mamba_ssm Mamba3 mixer inside MambaLMHeadModel; spec
// mamba3-siso.md).
//
// Per round: in_proj with the layer's RMSNorm in front; the mixer of ops/mamba3_scan.h (BCNorm,
// RoPE, the trapezoidal scan, the gate) per (sequence, head); out_proj added to the residual
// stream. Per-sequence state is the Mamba3StateLayout block: SSM [H, N, P], K [H, N], V [H, P],
// angles [H, max(na, 1)].
#pragma once

#include <vector>

#include "model/blocks/block.h"
#include "ops/mamba3_scan.h"

namespace mb {

class Mamba3Block final : public Block {
 public:
  Mamba3Block(const ModelConfig& config, const BlockSpec& spec, WeightBinder& binder);

  // The tensors of layer `layer`, indexed by Tensor. llama.cpp defines no Mamba-3, so none has a
  // GGUF name.
  static std::vector<TensorSpec> schema(const ModelConfig& config, const BlockSpec& block);
  enum Tensor : size_t {
    kNorm,      // [d_model]
    kInProj,    // [in_proj width, d_model]: z | x | B | C | dd_dt | dd_A | trap | angles
    kDtBias,    // [H]
    kBBias,     // [H, 1, N]
    kCBias,     // [H, 1, N]
    kBNorm,     // [N]
    kCNorm,     // [N]
    kD,         // [H]
    kGateNorm,  // [d_inner], absent for y * silu(z)
    kOutProj,   // [d_model, d_inner]
    kTensors,
  };

  // The profiling phase of the whole mixer op, named here for benchmarks that time it alone.
  static constexpr std::string_view kMixerPhaseName = "mixer (bcnorm+rope+scan+gate)";

  // The scan's parameters with the host copies of its weights (for tests of the state layout).
  const Mamba3ScanParams& params() const { return params_; }
  // Test-only: drops the §10.3 boundary fold from chunked windows (see Mamba3ScanParams).
  void disable_boundary_fold_for_testing() { params_.boundary_fold = false; }

  // The parts of the block's state at the offsets of ops/mamba3_scan.h's Mamba3StateLayout (the
  // scan takes the whole block): ssm [H, N, P], k [H, N], v [H, P], angles [H, max(na, 1)].
  std::vector<StatePart> state_parts() const override;
  std::vector<int64_t> scratch_widths() const override;
  std::span<const std::string_view> phase_names() const override;
  std::vector<OpQuery> ops() const override;
  void forward(LayerContext& ctx) const override;

 private:
  int64_t d_model_;
  float norm_eps_;
  Mamba3ScanParams params_;
};

// num_rope_angles of spec §1.2: floor(floor(d_state * rope_fraction) / 2), in f32 as the reference.
int64_t mamba3_rope_angles(int64_t d_state, double rope_fraction);

}  // namespace mb

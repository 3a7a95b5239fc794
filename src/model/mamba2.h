// Mamba-2 (the Mamba2 mixer of mamba_ssm, HF Mamba2ForCausalLM).
//
// Each layer: RMSNorm, in_proj (one GEMM over every row of the round) giving z | xBC | dt, the
// causal conv + SiLU over xBC with carried history, the per-head SSM of ops/mamba2_scan.h, the
// grouped gated RMSNorm of ops/gated_rms_norm.h, out_proj with the residual add.
#pragma once

#include <memory>
#include <vector>

#include "model/model.h"
#include "ops/mamba2_scan.h"

namespace mb {

struct Mamba2Layer {
  const float* norm = nullptr;           // [d_model]
  WeightMatrix in_proj;                  // [2 d_inner + 2 G N + H, d_model]: rows z | x | B | C | dt
  const float* in_proj_bias = nullptr;   // [in_proj rows] or null
  const float* conv_weight = nullptr;    // [d_conv, conv_width] tap-major
  const float* conv_bias = nullptr;      // [conv_width] or null
  Mamba2ScanParams scan;                 // dt bias, A, D and sizes of this layer's SSM
  const float* gate_norm = nullptr;      // [d_inner] gated RMSNorm weight, or null for y * silu(z)
  WeightMatrix out_proj;                 // [d_model, d_inner]
  const float* out_proj_bias = nullptr;  // [d_model] or null
};

class Mamba2Model : public Model {
 public:
  Mamba2Model(const ModelConfig& config, std::shared_ptr<const TensorSet> tensors,
              const LoadOptions& options);

  // The parts of each layer's state (state_layout()), in this order: conv history
  // [d_conv - 1, conv_width] (oldest first), then SSM state [H, N, P].
  static constexpr size_t kConvPart = 0, kSsmPart = 1;
  int64_t conv_width() const { return config_.d_inner + 2 * config_.ngroups * config_.d_state; }
  int64_t in_proj_dim() const { return config_.d_inner + conv_width() + config_.n_heads(); }
  const std::vector<Mamba2Layer>& layers() const { return layers_; }

 protected:
  void forward_layers(const ComputeContext& ctx, std::span<const Rows> rows, float* hidden, int64_t m,
                      const ForwardOptions& options, Workspace& workspace, float* scratch) const override;
  size_t scratch_floats_per_row() const override;
  std::span<const std::string_view> layer_phase_names() const override;

 private:
  std::vector<Mamba2Layer> layers_;
};

}  // namespace mb

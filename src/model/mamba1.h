// Mamba-1 (the selective-scan block of mamba_ssm / HF MambaForCausalLM), and FalconMamba (HF
// FalconMambaForCausalLM), which only adds a weightless RMSNorm on x_proj's three outputs.
#pragma once

#include <memory>
#include <vector>

#include "model/model.h"

namespace mb {

struct Mamba1Layer {
  const float* norm = nullptr;           // [d_model]
  WeightMatrix in_proj;                  // [2 * d_inner, d_model]: rows 0..D-1 give x, D..2D-1 give z
  const float* in_proj_bias = nullptr;   // [2 * d_inner] or null
  const float* conv_weight = nullptr;    // [d_conv, d_inner] tap-major
  const float* conv_bias = nullptr;      // [d_inner] or null
  WeightMatrix x_proj;                   // [dt_rank + 2 * d_state, d_inner]: [dt_low | B | C]
  WeightMatrix dt_proj;                  // [d_inner, dt_rank]
  const float* dt_bias = nullptr;        // [d_inner]
  const float* a_base2 = nullptr;        // [d_state, d_inner] = -exp(A_log) * log2(e), state-major
  const float* d_skip = nullptr;         // [d_inner]
  WeightMatrix out_proj;                 // [d_model, d_inner]
  const float* out_proj_bias = nullptr;  // [d_model] or null
};

class Mamba1Model : public Model {
 public:
  Mamba1Model(const ModelConfig& config, std::shared_ptr<const TensorSet> tensors,
              const LoadOptions& options);

  // The parts of each layer's state (state_layout()), in this order: conv history
  // [d_conv - 1, d_inner] (oldest first), then SSM state [d_state, d_inner].
  static constexpr size_t kConvPart = 0, kSsmPart = 1;
  const std::vector<Mamba1Layer>& layers() const { return layers_; }
  // FalconMamba's weightless mixer norm multiplies by these ones; null for plain Mamba-1.
  const float* mixer_norm_ones() const { return mixer_norm_ones_; }

 protected:
  void forward_layers(const ComputeContext& ctx, std::span<const Rows> rows, float* hidden, int64_t m,
                      const ForwardOptions& options, Workspace& workspace, float* scratch) const override;
  size_t scratch_floats_per_row() const override;
  std::span<const std::string_view> layer_phase_names() const override;

 private:
  std::vector<Mamba1Layer> layers_;
  // FalconMamba's mixer norm has no weight; the shared RMSNorm op multiplies by these ones
  // (x * 1.0f is exact). [max(dt_rank, d_state)], null for plain Mamba-1.
  const float* mixer_norm_ones_ = nullptr;
};

}  // namespace mb

// SPDX-License-Identifier: MIT
// The tensors the Mamba mixers (Mamba-1, Mamba-2, Mamba-3) share, each named once: the layer
// norm, in_proj, the depthwise conv, the dt bias, A_log, D, the gated-norm weight and out_proj,
// with their biases. Each mixer's schema (mamba*_block.cc) lists these with its own shapes and
// adds its own tensors. Shapes are as the checkpoint stores them; inits are mamba_ssm's where
// they matter for the dynamics, and otherwise keep activations O(1) for unit inputs.
#pragma once

#include <cstdint>
#include <vector>

#include "model/weight_schema.h"

namespace mb::mamba_schema {

TensorSpec norm(const BlockSpec& block, int64_t d_model);                        // [d_model]
TensorSpec in_proj(const BlockSpec& block, int64_t rows, int64_t d_model);       // [rows, d_model]
TensorSpec in_proj_bias(const BlockSpec& block, int64_t rows, bool wanted);      // [rows]
TensorSpec conv(const BlockSpec& block, int64_t channels, int64_t kernel_size);  // [channels, 1, K]
TensorSpec conv_bias(const BlockSpec& block, int64_t channels, bool wanted);     // [channels]
TensorSpec dt_bias(const BlockSpec& block, int64_t heads);                       // [H] (Mamba-2 and -3)
TensorSpec a_log(const BlockSpec& block, std::vector<int64_t> shape,
                 TensorInit init);  // Mamba-1 [D, N], Mamba-2 [H]
TensorSpec d_skip(const BlockSpec& block, std::vector<int64_t> shape, GgufForm gguf_form);    // [D] or [H]
TensorSpec gate_norm(const BlockSpec& block, int64_t d_inner, TensorInit init, bool wanted);  // [d_inner]
// Residual branches are scaled by 1/sqrt(n_layer) so the stream stays O(1) with depth.
TensorSpec out_proj(const BlockSpec& block, int64_t d_model, int64_t d_inner,
                    int64_t n_layer);                                            // [d_model, d_inner]
TensorSpec out_proj_bias(const BlockSpec& block, int64_t d_model, bool wanted);  // [d_model]

}  // namespace mb::mamba_schema

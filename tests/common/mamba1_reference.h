// SPDX-License-Identifier: MIT
// A plain double-precision Mamba-1 language model, written from the math (HF slow_forward /
// mamba_ssm selective_state_update) with nothing shared with the engine beyond reading tensors.
// It runs one token at a time, as the recurrence is defined. A FalconMamba folder (model_type
// "falcon_mamba") adds HF FalconMambaMixer's weightless RMSNorm of dt_low, B and C.
#pragma once

#include <string>
#include <vector>

#include "core/dtype.h"

namespace mb::test {

class Mamba1Reference {
 public:
  // Loads `dir`. When `round_to` is set, the projection matrices and the LM head are rounded to
  // that dtype first, so the reference sees the same weights as an engine storing them that way.
  explicit Mamba1Reference(const std::string& dir, const DType* round_to = nullptr);

  // Feeds one token and returns the logits [vocab_size].
  std::vector<double> step(int token);
  // Feeds one row of raw features through input_proj (checkpoints made with --input-dim).
  std::vector<double> step_features(const std::vector<float>& features);
  std::vector<double> hidden_after_norm() const { return last_hidden_; }
  int64_t vocab_size() const { return vocab_size_; }

 private:
  struct Layer {
    std::vector<double> norm, in_proj, in_proj_bias, conv_w, conv_b, x_proj, dt_proj, dt_bias, a_log, d, out_proj,
        out_proj_bias;
    std::vector<double> conv_state;  // [D][K]: the last K inputs per channel
    std::vector<double> ssm;         // [D][N]
  };
  int64_t d_model_ = 0, d_inner_ = 0, d_state_ = 0, d_conv_ = 0, dt_rank_ = 0, vocab_size_ = 0;
  double eps_ = 1e-5;
  bool mixer_rms_norm_ = false;
  double mixer_rms_eps_ = 1e-6;
  std::vector<double> step_hidden(std::vector<double> h);

  std::vector<double> embedding_, lm_head_, norm_f_, input_proj_, input_proj_bias_;
  std::vector<Layer> layers_;
  std::vector<double> last_hidden_;
};

}  // namespace mb::test

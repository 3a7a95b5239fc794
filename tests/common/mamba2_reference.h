// SPDX-License-Identifier: MIT
// A plain double-precision Mamba-2 language model, written from the math of mamba_ssm's Mamba2
// mixer (selective_state_update for the SSM, RMSNormGated with norm_before_gate = false and
// group_size = d_inner / ngroups) with nothing shared with the engine beyond reading tensors and
// the config's sizes. It runs one token at a time, as the recurrence is defined.
#pragma once

#include <string>
#include <vector>

#include "core/dtype.h"
#include "model/config.h"

namespace mb::test {

// A small Mamba-2 config that tests then adjust.
inline ModelConfig mamba2_config(int64_t d_model = 64, int64_t d_state = 16, int64_t headdim = 16,
                                 int64_t ngroups = 1, int64_t vocab = 97) {
  ModelConfig c;
  c.arch = Architecture::Mamba2;
  c.d_model = d_model;
  c.n_layer = 2;
  c.vocab_size = vocab;
  c.ssm.expand = 2;
  c.ssm.d_inner = 2 * d_model;
  c.ssm.d_state = d_state;
  c.ssm.d_conv = 4;
  c.ssm.headdim = headdim;
  c.ssm.ngroups = ngroups;
  c.ssm.chunk_size = 32;
  c.pad_vocab_size_multiple = 16;
  return c;
}

class Mamba2Reference {
 public:
  // Loads `dir` (either layout). When `round_to` is set, the projection matrices and the LM head
  // are rounded to that dtype first, so the reference sees the same weights as an engine storing
  // them that way.
  explicit Mamba2Reference(const std::string& dir, const DType* round_to = nullptr);

  // Feeds one token and returns the logits [vocab_size].
  std::vector<double> step(int token);
  int64_t vocab_size() const { return config_.vocab_size; }

 private:
  struct Layer {
    std::vector<double> norm, in_proj, in_proj_bias, conv_w, conv_b, dt_bias, a_log, d, gate_norm, out_proj,
        out_proj_bias;
    std::vector<double> conv_state;  // [conv_width][K]: the last K inputs per channel
    std::vector<double> ssm;         // [H][P][N], as mamba_ssm lays it out
  };
  ModelConfig config_;
  std::vector<double> embedding_, lm_head_, norm_f_;
  std::vector<Layer> layers_;
};

}  // namespace mb::test

// SPDX-License-Identifier: MIT
// A plain double-precision Mamba-3 SISO language model, written from the spec
// (mamba3-siso.md §3 to §8) with nothing shared with the engine beyond reading tensors. It runs
// one token at a time, as the recurrence is defined.
#pragma once

#include <string>
#include <vector>

#include "core/dtype.h"
#include "model/config.h"

namespace mb::test {

// A small Mamba-3 config that tests then adjust.
inline ModelConfig mamba3_config(int64_t d_model = 64, int64_t d_state = 16, int64_t headdim = 64,
                                 int64_t vocab = 97) {
  ModelConfig c;
  c.arch = Architecture::Mamba3;
  c.d_model = d_model;
  c.n_layer = 2;
  c.vocab_size = vocab;
  c.ssm.expand = 2;
  c.ssm.d_inner = 2 * d_model;
  c.ssm.d_state = d_state;
  c.ssm.headdim = headdim;
  c.ssm.ngroups = 1;
  c.ssm.rope_fraction = 0.5;
  c.ssm.a_floor = 1e-4;
  c.ssm.is_outproj_norm = false;
  c.ssm.chunk_size = 64;
  c.pad_vocab_size_multiple = 8;
  return c;
}

class Mamba3Reference {
 public:
  // Loads `dir` (state-spaces config form). When `round_to` is set, matrices are rounded to that
  // dtype first, so the reference sees the same weights as an engine that stores them that way.
  explicit Mamba3Reference(const std::string& dir, const DType* round_to = nullptr);

  // Feeds one token and returns the logits [vocab_size].
  std::vector<double> step(int token);
  int64_t vocab_size() const { return vocab_size_; }

 private:
  struct Layer {
    std::vector<double> norm, in_proj, dt_bias, b_bias, c_bias, b_norm, c_norm, d, gate_norm, out_proj;
    std::vector<double> ssm;    // [H][P][N], as spec §7.3
    std::vector<double> k, v;   // [H][N], [H][P]
    std::vector<double> angle;  // [H][na]
  };
  int64_t d_model_ = 0, d_inner_ = 0, d_state_ = 0, headdim_ = 0, heads_ = 0, groups_ = 0, angles_ = 0,
          vocab_size_ = 0;
  double a_floor_ = 1e-4, eps_ = 1e-5;
  bool outproj_norm_ = false;
  std::vector<double> embedding_, lm_head_, norm_f_;
  std::vector<Layer> layers_;
};

}  // namespace mb::test

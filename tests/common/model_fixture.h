// SPDX-License-Identifier: MIT
// Builds small random checkpoints with make_model for model-level tests.
#pragma once

#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "model/make_model.h"
#include "model/model.h"

namespace mb::test {

// A tiny Mamba-1 config that tests then adjust.
inline ModelConfig small_config(int64_t d_model = 32, int64_t n_layer = 2, int64_t vocab = 97) {
  ModelConfig c;
  c.d_model = d_model;
  c.n_layer = n_layer;
  c.vocab_size = vocab;
  c.ssm.d_state = 16;
  c.ssm.d_conv = 4;
  c.ssm.expand = 2;
  c.ssm.d_inner = 2 * d_model;
  c.ssm.dt_rank = (d_model + 15) / 16;
  c.pad_vocab_size_multiple = 8;
  return c;
}

// Writes a checkpoint for `options` into a fresh temp dir and returns the dir.
std::string write_model(const MakeModelOptions& options, const std::string& tag);

// Rewrites the model.safetensors of `dir` with every tensor passed through `edit` (as f32 values,
// stored back in the tensor's dtype).
void edit_tensors(const std::string& dir,
                  const std::function<void(const std::string& name, std::vector<float>& values)>& edit);

// Rewrites the checkpoint of `dir` with every A_log set to 0 (A = -1 exactly, in f32 and in any
// rounding), so that a GGUF file's A gives the folder's bits; the other tensors keep their bytes.
void zero_a_log(const std::string& dir);

// Random token ids in [0, vocab).
std::vector<int32_t> random_tokens(size_t count, int64_t vocab, uint64_t seed);

// Runs `tokens` one decode step at a time from `state`; returns the logits of every step
// concatenated ([T, vocab]) and leaves the final state in `state`. When `states_after` is given
// it receives a copy of the state after every step.
std::vector<float> step_logits(const Model& model, const ComputeContext& ctx,
                               const std::vector<int32_t>& tokens, SequenceState& state,
                               std::vector<SequenceState>* states_after = nullptr);

// Runs `steps` decode steps of `sequences` fresh sequences as one batch (different tokens per
// step) under `ctx`, and each sequence alone on one thread; fails the test at the first logit
// row that differs in any bit.
void expect_batched_steps_equal_solo(const Model& model, const ComputeContext& ctx, size_t sequences,
                                     int steps);

// Decodes 40 random tokens step by step from a fresh state, then again as a prefill of the
// first 25 (run with `prefill_options`) followed by 15 steps; fails the test unless the 15
// steps' logits and the final state are bit-identical.
void expect_prefill_then_decode_equals_decode(const Model& model, const ComputeContext& ctx,
                                              const ForwardOptions& prefill_options);

// Decodes `max_length` random tokens step by step, then prefills every length T up to it (in a
// sampled run every length to 32, then every 29th) from a fresh state (one thread, one round,
// the sequential scan); fails the test unless the logits (every position's for T a multiple of 3,
// else the last) and the whole state equal the steps' bit for bit.
void expect_prefill_equals_steps_for_every_length(const Model& model, int64_t max_length);

// Prefills `tokens` (every position's logits) from fresh states with 1, 2 and 3 threads in rounds
// of each size of `rounds` (0: all at once), and with 2 threads on every supported instruction
// set; fails the test where the logits or the final state differ in any bit from the one-thread
// run of the whole input.
void expect_threads_rounds_and_isas_change_no_bit(const Model& model, const std::vector<int32_t>& tokens,
                                                  const std::vector<int64_t>& rounds,
                                                  ScanForm scan = ScanForm::Sequential);

// Prefills `prompts` as one batch on two threads, for each output kind of `kinds` and round size of
// `rounds`, and each prompt alone on one thread; fails the test where a sequence's outputs or final
// state differ in any bit.
void expect_batch_equals_each_alone(const Model& model, const std::vector<std::vector<int32_t>>& prompts,
                                    const std::vector<OutputKind>& kinds, const std::vector<int64_t>& rounds,
                                    ScanForm scan = ScanForm::Sequential, int64_t ssd_chunk = 0);

// Runs `tokens` as one forward call (a prefill) from `state` and returns its output rows.
std::vector<float> prefill(const Model& model, const ComputeContext& ctx, const std::vector<int32_t>& tokens,
                           SequenceState& state, const ForwardOptions& options);

// A fresh state after `tokens`, prefilled on one thread without logits.
SequenceState state_after(const Model& model, std::span<const int32_t> tokens);

}  // namespace mb::test

// SPDX-License-Identifier: MIT
// Throughput measurement shared by `mambacpp bench` and the bench/ binaries: prefill of a
// random prompt as one batched pass, the same prompt fed through the decode-step loop, and
// decode. Figures are medians over repeats after one warm-up run.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "core/profile.h"
#include "model/model.h"

namespace mb {

struct BenchOptions {
  int64_t prompt_len = 128;
  int64_t gen_len = 32;
  int64_t chunk = 512;
  int repeats = 3;
  int warmups = 1;          // untimed runs first (0 for a long prompt, whose one run dwarfs any warm-up)
  int64_t step_tokens = 0;  // prompt tokens fed through the step loop; 0 = min(prompt_len, 128)
  uint64_t seed = 1;
  bool profile = false;                  // time the phases of the prefill runs (a clock read per phase)
  ScanForm scan = ScanForm::Sequential;  // the prefill's form (Mamba-2 and Mamba-3)
  int64_t ssd_chunk = 0;                 // SSD chunk of the chunked form; 0 = the config's
  int64_t batch = 1;                     // sequences decoded together (each prefilled with the prompt)
};

struct BenchResult {
  double prefill_tok_s = 0, decode_tok_s = 0, step_prefill_tok_s = 0;
  // Median over the repeats of (prefill tok/s) / (step-loop tok/s) of the same repeat: the two
  // runs of a pair are seconds apart, so a slow spell of a shared machine mostly cancels out.
  double prefill_speedup = 0;
  int64_t step_tokens = 0;
  PhaseProfile prefill_phases;  // seconds per phase, averaged over the timed prefill runs
  // With a profile: the share of the profiled prefill time spent in each kind of block (all of
  // its phases: norm, products, the mixer), in order of first appearance; the rest of the time
  // (embedding, final norm, LM head) is under "head".
  std::vector<std::pair<std::string, double>> prefill_block_shares;
  // The attention core alone (the "attention" phase: scores, softmax and the weighted sum of V,
  // the part that grows with the context), as a share of the profiled prefill time.
  double prefill_attention_core_share = 0;
  // What a decode step of one sequence reads, in bytes: the weight matrices it streams (only the
  // chosen experts of a mixture of experts), the KV caches per position of context, and the fixed
  // state (conv and SSM parts), which a step reads and writes back.
  size_t step_matrix_bytes = 0, kv_bytes_per_position = 0, fixed_state_bytes = 0;
  // Per decoded token of the timed decode (batch 1; 0 otherwise): step_matrix_bytes, the KV read
  // at the mean context of the decode steps, and the fixed state read and written.
  double decode_read_bytes = 0;
  // On a device with timestamps: device time per phase of the last timed prefill call and of
  // the last decode step (empty on the CPU).
  std::vector<DevicePhaseTime> device_prefill, device_decode_step;
};

BenchResult run_benchmark(const Model& model, const ComputeContext& ctx, const BenchOptions& options);

}  // namespace mb

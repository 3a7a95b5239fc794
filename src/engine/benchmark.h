// Throughput measurement shared by `mambacpp bench` and the bench/ binaries: prefill of a
// random prompt as one batched pass, the same prompt fed through the decode-step loop, and
// decode. Figures are medians over repeats after one warm-up run.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/profile.h"
#include "model/model.h"

namespace mb {

struct BenchOptions {
  int64_t prompt_len = 128;
  int64_t gen_len = 32;
  int64_t chunk = 512;
  int repeats = 3;
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
  // On a device with timestamps: device time per phase of the last timed prefill call and of
  // the last decode step (empty on the CPU).
  std::vector<DevicePhaseTime> device_prefill, device_decode_step;
};

BenchResult run_benchmark(const Model& model, const ComputeContext& ctx, const BenchOptions& options);

}  // namespace mb

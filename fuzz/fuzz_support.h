// SPDX-License-Identifier: MIT
// Shared helpers of the libFuzzer harnesses: a scratch folder per process and the small fixed
// inputs (a tiny model, good tokenizers) that several harnesses feed the fuzzer's bytes to.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "core/error.h"
#include "io/safetensors.h"

#include "model/config.h"

namespace mb::fuzz {

// A fresh folder under /dev/shm (or /tmp) for this process, removed at exit. Harnesses whose
// parser takes a path write the fuzzer's bytes into it, so the real file-reading code runs.
const std::string& scratch_dir();

// Writes `bytes` to scratch_dir()/name (plainly, not atomically: the harness is the only
// reader) and returns the path.
std::string write_scratch_file(const std::string& name, std::span<const uint8_t> bytes);

// Runs `parse`, treating mb::Error as the expected outcome for bad input. An internal check
// failure (MB_CHECK) is a bug reachable from input and aborts, and so, by escaping, does any
// other exception: bad input must only ever produce mb::Error.
template <class Parse>
void expect_clean_refusal(Parse&& parse);

// Sums every byte of `bytes` so that AddressSanitizer checks the whole range lies in mapped
// memory; the result is only kept alive.
void touch(std::span<const uint8_t> bytes);

// Writes the tensors of `set` (and its metadata) with SafetensorsWriter, and with `torch_too`
// also with write_torch_checkpoint when every dtype has a torch storage type, reopens each copy
// and aborts unless it holds the same names, dtypes, shapes and bytes: whatever the readers
// accept, the writers must be able to write and the readers to read back.
void expect_round_trip(const TensorSet& set, bool torch_too);

// The config of the fixed tiny model (Mamba-1, d_model 16, 1 layer, vocab 260) that the
// state-file harness and the seed corpus share, so seeds carry the right fingerprint.
ModelConfig tiny_model_config();

// Writes the fixed tiny model (seed 0, F32 safetensors) into `dir`.
void write_tiny_model(const std::string& dir);

[[noreturn]] void abort_on_internal_check(const char* message);

template <class Parse>
void expect_clean_refusal(Parse&& parse) {
  try {
    parse();
  } catch (const Error& e) {
    if (std::string_view(e.what()).starts_with("internal check failed")) abort_on_internal_check(e.what());
  }
}

}  // namespace mb::fuzz

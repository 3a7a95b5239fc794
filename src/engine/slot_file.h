// SPDX-License-Identifier: MIT
// Slot files: a saved prefix state together with the tokens it consumed, so a server can put it
// back into its prefix cache later (or after a restart) and resume requests that share the prefix.
//
// File format (little-endian), version 2 (version 1 files, whose fingerprints were built otherwise, are
// refused as written by an older version):
//   "MBSLOT01" | u32 version | u64 token count n | i32 tokens[n] | u64 state byte count |
//   state bytes (the state file format of state_file.h, with its own checksum) |
//   u64 FNV-1a checksum of everything before it
// One file, written atomically, so a token list can never be paired with another prefix's state.
// A file for another model, truncated, corrupted, or whose state did not consume exactly its
// tokens is refused with a message naming the file.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "model/model.h"

namespace mb {

struct SlotFile {
  std::vector<int32_t> tokens;
  SequenceState state;  // has consumed exactly `tokens`, from a fresh state
};

void save_slot_file(const std::string& path, const Model& model, std::span<const int32_t> tokens,
                    const SequenceState& state);
SlotFile load_slot_file(const std::string& path, const Model& model);

}  // namespace mb

// SPDX-License-Identifier: MIT
// Saving and restoring a sequence's recurrent state, so a conversation or a shared prefix
// continues later without re-prefilling. Continuing from a restored state is bit-identical to
// the uninterrupted run, because the state is exactly the decode state.
//
// File format (little-endian), version 2 (version 1 files, whose fingerprints were built otherwise, are
// refused as written by an older version):
//   "MBSTATE1" | u32 version | u32 architecture | u64 model fingerprint | u64 float count |
//   i64 position | f32 values[float count] | u64 FNV-1a checksum of everything before it
// A file for another model, of another size, truncated or corrupted is refused with a message.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "model/model.h"

namespace mb {

void save_state(const std::string& path, const Model& model, const SequenceState& state);
SequenceState load_state(const std::string& path, const Model& model);

// The same format in memory, for containers that embed a state (slot files). `where` names the
// source in error messages (e.g. "state file 'x.state'").
std::vector<uint8_t> serialize_state(const Model& model, const SequenceState& state);
SequenceState parse_state(std::span<const uint8_t> bytes, const Model& model, const std::string& where);

}  // namespace mb

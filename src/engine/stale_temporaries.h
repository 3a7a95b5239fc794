// SPDX-License-Identifier: MIT
// Temporaries a killed writer left in a slot folder: write_file_atomically writes
// "<name>.tmp-<16 hex>" and renames it, so a writer killed in between leaves the temporary behind,
// where nothing would ever read or remove it. A server reclaims them when it starts (Scheduler with
// a slot save path, PrefixStore), and the prefix store counts its live ones against its budget.
#pragma once

#include <sys/stat.h>

#include <cstdint>
#include <string>
#include <string_view>

namespace mb {

// A temporary untouched for this long was left by a writer that was killed before its rename: a
// live one writes a few megabytes and renames within seconds, and a replica sharing the folder
// may be writing one right now, so younger ones stay.
inline constexpr int64_t kStaleTemporaryNs = int64_t{300} * 1'000'000'000;

// True for write_file_atomically's temporary names: "<name>.tmp-" and 16 lowercase hex digits.
bool is_temporary_name(std::string_view name);
// The wall clock, in nanoseconds since the epoch (what file times are in).
int64_t wall_clock_ns();
bool is_stale_temporary(const struct stat& info, int64_t now_ns);
// Removes the stale temporaries of `folder` (slot files' and prefix files' alike, of any model);
// returns how many.
uint64_t reclaim_stale_temporaries(const std::string& folder);

}  // namespace mb

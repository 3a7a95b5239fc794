// SPDX-License-Identifier: MIT
// Writing float32 arrays as NumPy .npy files (format version 1.0, C order), atomically.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace mb {

void write_npy_f32(const std::string& path, std::span<const float> values, const std::vector<int64_t>& shape);

// Reads back a float32 .npy written by write_npy_f32 (used by tests and tools); throws mb::Error.
std::vector<float> read_npy_f32(const std::string& path, std::vector<int64_t>& shape);

}  // namespace mb

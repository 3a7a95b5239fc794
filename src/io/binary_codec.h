// SPDX-License-Identifier: MIT
// Helpers shared by the engine's small binary file formats (state files, slot files): values
// appended to and read from byte buffers in the machine's byte order (the formats are defined
// as little-endian, and only little-endian targets are built), and the FNV-1a checksum the
// formats end with.
#pragma once

#include <cstdint>
#include <cstring>
#include <vector>

namespace mb::binary {

inline uint64_t fnv1a64(const uint8_t* data, size_t size) {
  uint64_t hash = 0xcbf29ce484222325ull;
  for (size_t i = 0; i < size; ++i) hash = (hash ^ data[i]) * 0x100000001b3ull;
  return hash;
}

template <class T>
void put(std::vector<uint8_t>& out, T value) {
  const auto* bytes = reinterpret_cast<const uint8_t*>(&value);
  out.insert(out.end(), bytes, bytes + sizeof value);
}

// Reads a T at a possibly unaligned address; the caller has checked the bounds.
template <class T>
T get(const uint8_t* at) {
  T value;
  std::memcpy(&value, at, sizeof value);
  return value;
}

}  // namespace mb::binary

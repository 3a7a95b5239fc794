// SPDX-License-Identifier: MIT
// The seeded generator of make-model: splitmix64 with a fixed mapping to [0, 1), so the same
// seed writes the same checkpoint on any machine and standard library.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace mb {

class SeededRandom {
 public:
  explicit SeededRandom(uint64_t seed) : state_(seed * 0x9e3779b97f4a7c15ull + 0x632be59bd9b4e019ull) {}
  uint64_t next() {
    uint64_t z = (state_ += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }  // [0, 1)
  // Uniform values in [-bound, bound).
  std::vector<float> uniform_values(size_t count, double bound) {
    std::vector<float> values(count);
    for (float& v : values) v = static_cast<float>((2.0 * uniform() - 1.0) * bound);
    return values;
  }

 private:
  uint64_t state_;
};

}  // namespace mb

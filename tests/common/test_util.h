// SPDX-License-Identifier: MIT
// Small helpers shared by the test suites.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "core/threading.h"

namespace mb::test {

inline std::vector<float> random_floats(size_t count, uint64_t seed, float scale = 1.0f) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> dist(-scale, scale);
  std::vector<float> values(count);
  for (float& v : values) v = dist(rng);
  return values;
}

inline bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size()) return false;
  return a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// The maxima below are written as comparisons, which ignore a NaN as std::fmax does: GCC 12's
// AArch64 vectorizer crashes on an std::fmax reduction of widened floats at -O3.
inline double max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  double worst = a.size() == b.size() ? 0.0 : INFINITY;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
    const double diff = std::fabs(double(a[i]) - b[i]);
    if (diff > worst) worst = diff;
  }
  return worst;
}

inline double max_abs(const std::vector<float>& a) {
  double worst = 0.0;
  for (float v : a) {
    const double magnitude = std::fabs(double(v));
    if (magnitude > worst) worst = magnitude;
  }
  return worst;
}

// Normalized mean squared error of `got` against a double reference: the sum of squared errors
// over the sum of squared reference values (the plain sum of squared errors when those are 0).
double nmse(const std::vector<float>& got, const std::vector<double>& reference);
double nmse(const std::vector<float>& got, const std::vector<float>& reference);

// The index of the first element whose bits differ, or -1 (0 when the sizes differ).
long first_bit_difference(const std::vector<float>& a, const std::vector<float>& b);

// Every instruction set this CPU can run, for tests that pin cross-ISA equality.
inline std::vector<Isa> supported_isas() {
  std::vector<Isa> isas;
  for (Isa isa : {Isa::Scalar, Isa::Avx2, Isa::Avx512, Isa::Neon})
    if (isa_supported(isa)) isas.push_back(isa);
  return isas;
}

// True when the tests run 5-50x slower than native: under an instruction-set emulator (the
// AArch64 cross build under qemu-user) or a sanitizer (tests/CMakeLists.txt: ASan and TSan). Sweeps whose
// size buys coverage of lengths and thread/round combinations rather than of kernels take a sample there (the
// kernels and the races are still all exercised); native runs always take the whole sweep.
inline bool sampled_sweeps() {
#ifdef MB_TESTS_SAMPLED_SWEEPS
  return true;
#else
  return false;
#endif
}

// A fresh temporary directory under the system temp dir.
std::string make_temp_dir(const std::string& tag);

// The bytes of `path` under tests/data (read_text_file: an mb::Error names a file it cannot read).
std::string read_data_file(const std::string& path);

// The bytes of a string, as the byte-level writers take them.
std::vector<uint8_t> bytes_of(const std::string& text);

// Writes `bytes` to `path`, replacing what was there.
void write_bytes(const std::string& path, const std::string& bytes);

// The message of the mb::Error `action` throws; fails the test when it throws nothing or any
// other exception.
std::string error_of(const std::function<void()>& action);

}  // namespace mb::test

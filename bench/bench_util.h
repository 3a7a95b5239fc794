// SPDX-License-Identifier: MIT
// Small helpers shared by the bench/ binaries: comma-separated flag lists and medians.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "core/isa_flag.h"

namespace mb::bench {

// The kernels' instruction set: the environment's MB_ISA (auto | avx512 | avx2 | scalar | neon),
// so the AVX2 path can be measured on an AVX-512 machine too; the CPU's best without it.
// A name it cannot use ends the program with the message and exit status 2.
inline Isa isa_from_environment() {
  const char* name = std::getenv("MB_ISA");
  try {
    return parse_isa(name != nullptr ? name : "auto", "MB_ISA");
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s\n", e.what());
    std::exit(2);
  }
}

inline std::vector<int64_t> parse_list(const char* text) {
  std::vector<int64_t> values;
  for (const char* p = text; p != nullptr && *p;) {
    values.push_back(std::strtoll(p, nullptr, 10));
    p = std::strchr(p, ',');
    if (p != nullptr) ++p;
  }
  return values;
}

inline double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
}

}  // namespace mb::bench

// Small helpers shared by the bench/ binaries: comma-separated flag lists and medians.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace mb::bench {

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

// SPDX-License-Identifier: MIT
#include "common/timing.h"

#include <time.h>

#include <algorithm>
#include <limits>

#include "common/test_util.h"

namespace mb::test {

namespace {

double thread_cpu_seconds() {
  timespec now{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now);
  return static_cast<double>(now.tv_sec) + 1e-9 * static_cast<double>(now.tv_nsec);
}

}  // namespace

double least_cpu_seconds(const std::function<void()>& work, int runs) {
  double least = std::numeric_limits<double>::infinity();
  for (int i = 0; i < runs; ++i) {
    const double start = thread_cpu_seconds();
    work();
    least = std::min(least, thread_cpu_seconds() - start);
  }
  return least;
}

double growth_for_4x(const std::function<void(int n)>& work, int n) {
  // The two sizes take turns, so a burst of load on a shared machine slows both alike rather than
  // only the one that happened to run during it; each keeps its least time.
  double small = std::numeric_limits<double>::infinity(), large = small;
  for (int run = 0; run < 5; ++run) {
    small = std::min(small, least_cpu_seconds([&] { work(n); }, 1));
    large = std::min(large, least_cpu_seconds([&] { work(4 * n); }, 1));
  }
  // A clock tick of a few microseconds must not turn into a huge ratio.
  return large / std::max(small, 1e-4);
}

double scaled_seconds(double native) {
  return sampled_sweeps() ? 4 * native : native;
}

}  // namespace mb::test

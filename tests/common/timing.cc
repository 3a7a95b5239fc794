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
  const double small = least_cpu_seconds([&] { work(n); });
  const double large = least_cpu_seconds([&] { work(4 * n); });
  // A clock tick of a few microseconds must not turn into a huge ratio.
  return large / std::max(small, 1e-4);
}

double scaled_seconds(double native) {
  return sampled_sweeps() ? 4 * native : native;
}

}  // namespace mb::test

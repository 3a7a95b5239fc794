// SPDX-License-Identifier: MIT
// Measures the machine's sustained read bandwidth the way decode reads weights: streaming a
// buffer much larger than the caches with wide loads, split over threads. Prints GB/s for
// 1..N threads (medians of 5 passes).
#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

namespace {

// Sums the buffer with four independent 8-wide accumulators (so the adds never limit the
// rate); the result is printed so the reads cannot be optimized away.
float read_all(const float* data, size_t count, int threads) {
  float total = 0;
#pragma omp parallel num_threads(threads) reduction(+ : total)
  {
    __m256 acc0 = _mm256_setzero_ps(), acc1 = acc0, acc2 = acc0, acc3 = acc0;
#pragma omp for schedule(static)
    for (size_t block = 0; block < count / 32; ++block) {
      const float* p = data + block * 32;
      // Software prefetch a little ahead, as the decode kernel does, so the probe measures
      // what a streaming kernel can reach rather than the hardware prefetcher alone.
      __builtin_prefetch(p + 512);
      __builtin_prefetch(p + 528);
      acc0 = _mm256_add_ps(acc0, _mm256_loadu_ps(p));
      acc1 = _mm256_add_ps(acc1, _mm256_loadu_ps(p + 8));
      acc2 = _mm256_add_ps(acc2, _mm256_loadu_ps(p + 16));
      acc3 = _mm256_add_ps(acc3, _mm256_loadu_ps(p + 24));
    }
    float lanes[8];
    _mm256_storeu_ps(lanes, _mm256_add_ps(_mm256_add_ps(acc0, acc1), _mm256_add_ps(acc2, acc3)));
    for (float lane : lanes) total += lane;
  }
  return total;
}

}  // namespace

int main(int argc, char** argv) {
  const size_t bytes = (argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 1024) << 20;  // MiB
  const int max_threads = argc > 2 ? std::atoi(argv[2]) : omp_get_num_procs();
  std::vector<float> buffer(bytes / sizeof(float), 1.0f);
  std::printf("buffer %zu MiB\n", bytes >> 20);
  for (int threads = 1; threads <= max_threads; ++threads) {
    std::vector<double> rates;
    float sink = 0;
    for (int pass = 0; pass < 6; ++pass) {
      const auto start = std::chrono::steady_clock::now();
      sink += read_all(buffer.data(), buffer.size(), threads);
      const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      if (pass > 0) rates.push_back(bytes / seconds / 1e9);
    }
    std::sort(rates.begin(), rates.end());
    std::printf("threads %d: read bandwidth %.2f GB/s (median of %zu; checksum %g)\n", threads, rates[rates.size() / 2],
                rates.size(), sink);
  }
  return 0;
}

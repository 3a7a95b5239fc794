// SPDX-License-Identifier: MIT
// Weight quantization speed: the reference quantizers (quantize_row_reference, one thread)
// against the vector kernels (quantize_rows) on the same rows, per format, in blocks per second.
// Rounds alternate the two so a slow spell of a shared machine hits both alike; figures are
// medians over the rounds. Every kernel run is checked against the reference bytes.
//
//   quantize_bench [rows=2048] [cols=768] [threads=1] [types=q8_0,q4_0,q4_k,q6_k] [rounds=7]
//
// MB_ISA=avx2 (or scalar, avx512) runs the kernels of a narrower instruction set than the CPU's best.
#include <time.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "bench_util.h"
#include "core/dtype.h"
#include "ops/quant.h"

namespace {

double process_cpu_seconds() {
  timespec t{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

// Wall seconds and CPU seconds (every thread of the process) of one call.
struct Seconds {
  double wall, cpu;
};
template <class F>
Seconds seconds_of(F&& body) {
  const double cpu = process_cpu_seconds();
  const auto start = std::chrono::steady_clock::now();
  body();
  return {std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(),
          process_cpu_seconds() - cpu};
}

std::vector<mb::DType> parse_types(const char* text) {
  std::vector<mb::DType> types;
  std::string list = text;
  size_t start = 0;
  while (start <= list.size()) {
    const size_t end = std::min(list.find(',', start), list.size());
    if (end > start) types.push_back(mb::parse_dtype(list.substr(start, end - start)));
    start = end + 1;
  }
  return types;
}

}  // namespace

int main(int argc, char** argv) {
  const int64_t rows = argc > 1 ? std::atoll(argv[1]) : 2048;
  const int64_t cols = argc > 2 ? std::atoll(argv[2]) : 768;
  const int threads = argc > 3 ? std::atoi(argv[3]) : 1;
  const std::vector<mb::DType> types = parse_types(argc > 4 ? argv[4] : "q8_0,q4_0,q4_k,q6_k");
  const int rounds = argc > 5 ? std::atoi(argv[5]) : 7;
  const mb::Isa isa = mb::bench::isa_from_environment();
  std::mt19937 rng(1);
  std::normal_distribution<float> normal(0.0f, 0.02f);
  std::vector<float> x(static_cast<size_t>(rows * cols));
  for (float& v : x) v = normal(rng);
  std::printf("rows %lld, cols %lld, kernels %s on %d thread(s), reference on 1; medians of %d rounds\n",
              static_cast<long long>(rows), static_cast<long long>(cols), mb::isa_name(isa), threads, rounds);
  // On a shared machine the wall-clock rates suffer from other jobs (and a team of threads from
  // each of its threads that is descheduled); blocks per CPU second, which waiting does not count,
  // show the kernels' own cost (with several threads set OMP_WAIT_POLICY=passive, or spinning
  // counts).
  std::printf("%-6s %16s %16s %8s %20s %20s %8s\n", "type", "reference blk/s", "kernels blk/s", "speedup",
              "reference blk/cpu-s", "kernels blk/cpu-s", "speedup");
  const mb::ComputeContext ctx{threads, isa};
  for (const mb::DType type : types) {
    const size_t bytes = mb::dtype_row_bytes(type, rows * cols);
    const double blocks = static_cast<double>(rows * cols / mb::dtype_block_weights(type));
    std::vector<uint8_t> want(bytes), got(bytes);
    std::vector<double> reference_wall, kernel_wall, wall_ratio, reference_cpu, kernel_cpu, cpu_ratio;
    for (int round = 0; round <= rounds; ++round) {  // round 0 is the warm-up
      const Seconds r =
          seconds_of([&] { mb::quantize_row_reference(type, x.data(), rows * cols, want.data()); });
      const Seconds k =
          seconds_of([&] { mb::quantize_rows(ctx, x.data(), mb::DType::F32, rows, cols, type, got.data()); });
      if (std::memcmp(want.data(), got.data(), bytes) != 0) {
        std::fprintf(stderr, "%s: the kernels' bytes differ from the reference\n",
                     std::string(mb::dtype_name(type)).c_str());
        return 1;
      }
      if (round == 0) continue;
      reference_wall.push_back(r.wall);
      kernel_wall.push_back(k.wall);
      wall_ratio.push_back(r.wall / k.wall);
      reference_cpu.push_back(r.cpu);
      kernel_cpu.push_back(k.cpu);
      cpu_ratio.push_back(r.cpu / k.cpu);
    }
    using mb::bench::median;
    std::printf("%-6s %16.0f %16.0f %7.1fx %20.0f %20.0f %7.1fx\n", std::string(mb::dtype_name(type)).c_str(),
                blocks / median(reference_wall), blocks / median(kernel_wall), median(wall_ratio),
                blocks / median(reference_cpu), blocks / median(kernel_cpu), median(cpu_ratio));
  }
  return 0;
}

// SPDX-License-Identifier: MIT
// GEMM throughput on the prefill shapes of the 130m preset: mambacpp's deterministic kernel
// against OpenBLAS sgemm on the same shapes and thread counts (OpenBLAS is linked into this
// benchmark only, never into the engine). Prints GFLOP/s medians and the ratio.
//
//   gemm_bench [rows=512] [threads=1] [dtype=f32] [shapes=130m] [rounds=15]
//
// shapes: 130m (the Mamba-1 preset's products), micro (Granite-4.0-H-Micro's: Mamba-2 in/out
// projections, SwiGLU up and down) or nemotron (Nemotron-H-8B's: Mamba-2 in/out, ReLU^2 up and
// down), the last two with K large enough that a panel outgrows the L2 cache.
//
// MB_ISA=avx2 (or scalar, avx512) runs the kernels of a narrower instruction set than the CPU's
// best, and the peak probe of that set, so an AVX-512 machine measures the AVX2 path too.
#include <cblas.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <iterator>
#include <string>
#include <thread>
#include <vector>

#include "bench_util.h"
#include "core/dtype.h"
#include "io/safetensors.h"
#include "ops/matmul.h"

#include <immintrin.h>
#include <omp.h>

extern "C" void openblas_set_num_threads(int);

namespace {

// The core's f32 FMA peak: independent FMA chains on the widest vectors the CPU has (AVX-512,
// else AVX2 with FMA3), enough of them to cover the latency of two FMA ports, on every thread.
// Returns GFLOP/s, or 0 on a CPU with neither.
__attribute__((target("avx512f"))) double fma_peak_avx512(int threads, long iterations) {
  float sink = 0;
#pragma omp parallel num_threads(threads) reduction(+ : sink)
  {
    __m512 acc[16];
    for (int i = 0; i < 16; ++i) acc[i] = _mm512_set1_ps(static_cast<float>(i));
    const __m512 a = _mm512_set1_ps(0.999999f), b = _mm512_set1_ps(1e-7f);
    for (long it = 0; it < iterations; ++it)
      for (int i = 0; i < 16; ++i) acc[i] = _mm512_fmadd_ps(acc[i], a, b);
    for (int i = 0; i < 16; ++i) sink += _mm512_reduce_add_ps(acc[i]);
  }
  return sink;
}

// Twelve ymm chains: 16 registers hold them and the two constants.
__attribute__((target("avx2,fma"))) double fma_peak_avx2(int threads, long iterations) {
  float sink = 0;
#pragma omp parallel num_threads(threads) reduction(+ : sink)
  {
    __m256 acc[12];
    for (int i = 0; i < 12; ++i) acc[i] = _mm256_set1_ps(static_cast<float>(i));
    const __m256 a = _mm256_set1_ps(0.999999f), b = _mm256_set1_ps(1e-7f);
    for (long it = 0; it < iterations; ++it)
      for (int i = 0; i < 12; ++i) acc[i] = _mm256_fmadd_ps(acc[i], a, b);
    alignas(32) float lanes[8];
    for (int i = 0; i < 12; ++i) {
      _mm256_store_ps(lanes, acc[i]);
      for (float lane : lanes) sink += lane;
    }
  }
  return sink;
}

// The peak of the instruction set the kernels run (0 for the scalar kernels: no vector probe).
double fma_peak_gflops(int threads, mb::Isa isa) {
  constexpr long kIterations = 5'000'000;
  const bool avx512 = isa == mb::Isa::Avx512;
  if (!avx512 && isa != mb::Isa::Avx2) return 0.0;
  const auto start = std::chrono::steady_clock::now();
  const double sink = avx512 ? fma_peak_avx512(threads, kIterations) : fma_peak_avx2(threads, kIterations);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (sink == 12345.0) std::printf(" ");
  const double flops_per_iteration = avx512 ? 16.0 * 16 * 2 : 12.0 * 8 * 2;
  return threads * kIterations * flops_per_iteration / seconds / 1e9;
}

template <class F>
double seconds_of(F&& body) {
  const auto start = std::chrono::steady_clock::now();
  body();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  const int64_t rows = argc > 1 ? std::atoll(argv[1]) : 512;
  const int threads = argc > 2 ? std::atoi(argv[2]) : 1;
  const mb::DType dtype = mb::parse_dtype(argc > 3 ? argv[3] : "f32");
  const mb::Isa isa = mb::bench::isa_from_environment();
  openblas_set_num_threads(threads);
  struct Shape {
    const char* name;
    int64_t n, k;
  };
  const std::string shape_set = argc > 4 ? argv[4] : "130m";
  std::vector<Shape> shapes;
  if (shape_set == "130m")
    shapes = {{"in_proj", 3072, 768}, {"x_proj", 80, 1536}, {"dt_proj", 1536, 48}, {"out_proj", 768, 1536}};
  else if (shape_set == "micro")
    shapes = {{"in_proj", 8512, 2048}, {"out_proj", 2048, 4096}, {"up", 16384, 2048}, {"down", 2048, 8192}};
  else if (shape_set == "nemotron")
    shapes = {{"in_proj", 18560, 4096}, {"out_proj", 4096, 8192}, {"up", 21504, 4096}, {"down", 4096, 21504}};
  else {
    std::fprintf(stderr, "unknown shapes '%s' (130m | micro | nemotron)\n", shape_set.c_str());
    return 2;
  }
  std::printf("rows %lld, threads %d, weights %s, kernels %s\n", static_cast<long long>(rows), threads,
              std::string(mb::dtype_name(dtype)).c_str(), mb::isa_name(isa));
  // The machine is shared: the best of short probes spread over the whole run (one per round)
  // is the closest to the cores' peak.
  double peak = 0.0;
  struct Data {
    std::vector<float> x, w, y;
    std::vector<uint8_t> stored;
  };
  std::vector<Data> data;
  for (const Shape& s : shapes) {
    Data d{std::vector<float>(rows * s.k), std::vector<float>(s.n * s.k), std::vector<float>(rows * s.n), {}};
    for (size_t i = 0; i < d.x.size(); ++i) d.x[i] = static_cast<float>((i * 7919) % 1000) / 1000.0f - 0.5f;
    for (size_t i = 0; i < d.w.size(); ++i) d.w[i] = static_cast<float>((i * 104729) % 1000) / 1000.0f - 0.5f;
    d.stored = mb::pack_weights(d.w.data(), mb::DType::F32, s.n, s.k, dtype);
    data.push_back(std::move(d));
  }
  // Rounds alternate the two libraries shape by shape, so a slow spell of this shared machine
  // hits both alike; figures are medians over the rounds. With several threads each call is
  // followed by a pause: OpenBLAS's workers (and OpenMP's) spin for a while after a call and
  // would otherwise steal cores from the other library's next call.
  const int rounds = argc > 5 ? std::atoi(argv[5]) : 15;
  std::vector<std::vector<double>> ours_s(shapes.size()), blas_s(shapes.size());
  std::vector<double> round_ratio;
  const auto settle = [&] {
    if (threads > 1) std::this_thread::sleep_for(std::chrono::milliseconds(150));
  };
  const mb::ComputeContext ctx{threads, isa};
  for (int round = 0; round <= rounds; ++round) {  // round 0 is the warm-up
    double round_ours = 0, round_blas = 0;
    for (size_t i = 0; i < shapes.size(); ++i) {
      const Shape& s = shapes[i];
      Data& d = data[i];
      const mb::MatmulArgs args{d.x.data(), s.k,        rows, {d.stored.data(), dtype, s.n, s.k},
                                nullptr,    d.y.data(), s.n,  false};
      // Each timed call directly follows an untimed one of the same library on the same shape,
      // so both are measured with their operands as warm as a prefill leaves them.
      const auto run_ours = [&] { mb::matmul(ctx, args); };
      const auto run_blas = [&] {
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, rows, s.n, s.k, 1.0f, d.x.data(), s.k,
                    d.w.data(), s.k, 0.0f, d.y.data(), s.n);
      };
      run_ours();
      const double ours = seconds_of(run_ours);
      settle();
      run_blas();
      const double blas = seconds_of(run_blas);
      settle();
      if (round == 0) continue;
      ours_s[i].push_back(ours);
      blas_s[i].push_back(blas);
      round_ours += ours;
      round_blas += blas;
    }
    if (round > 0) round_ratio.push_back(round_blas / round_ours);
    peak = std::max(peak, fma_peak_gflops(threads, isa));
  }
  std::printf("f32 FMA peak of %s on %d thread(s): %.1f GFLOP/s (best of %d probes)\n", mb::isa_name(isa),
              threads, peak, rounds + 1);
  std::printf("%-9s %6s %6s %12s %12s %7s %8s\n", "shape", "N", "K", "mambacpp", "openblas", "ratio",
              "of peak");
  std::vector<double> ours(shapes.size()), blas(shapes.size());
  for (size_t i = 0; i < shapes.size(); ++i) ours[i] = median(ours_s[i]), blas[i] = median(blas_s[i]);
  double total_ours = 0, total_blas = 0, total_flops = 0;
  for (size_t i = 0; i < shapes.size(); ++i) {
    const Shape& s = shapes[i];
    const double flops = 2.0 * rows * s.n * s.k;
    total_ours += ours[i];
    total_blas += blas[i];
    total_flops += flops;
    std::printf("%-9s %6lld %6lld %9.1f GF %9.1f GF %6.2fx %7.0f%%\n", s.name, static_cast<long long>(s.n),
                static_cast<long long>(s.k), flops / ours[i] / 1e9, flops / blas[i] / 1e9, blas[i] / ours[i],
                peak > 0 ? 100 * flops / ours[i] / 1e9 / peak : 0.0);
  }
  std::printf("%-9s %13s %9.1f GF %9.1f GF %6.2fx %7.0f%%\n", "all", "", total_flops / total_ours / 1e9,
              total_flops / total_blas / 1e9, total_blas / total_ours,
              peak > 0 ? 100 * total_flops / total_ours / 1e9 / peak : 0.0);
  std::printf("median over %d rounds of the round's ratio (all shapes): %.2fx\n", rounds,
              median(round_ratio));
  return 0;
}

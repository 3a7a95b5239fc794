// SPDX-License-Identifier: MIT
// The Mamba-2 scan op alone (ops/mamba2_scan.h) at one layer of a given shape (default: the
// 130m-sized model, 24 heads of 64 channels, d_state 128, one group): positions per second of the
// sequential recurrence and of the chunked SSD form at several chunk lengths. The variants
// alternate run by run; medians over repeats after a warm-up.
//
//   mamba2_op_bench [--threads 1] [--lengths 1,64,256,1024] [--chunks 32,64,128,256] [--repeats 5]
//                   [--heads 24] [--headdim 64] [--d-state 128] [--groups 1]
#include <chrono>
#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "bench_util.h"
#include "ops/mamba2_scan.h"

int main(int argc, char** argv) {
  using namespace mb;
  std::vector<int64_t> lengths = {1, 64, 256, 1024}, chunks = {32, 64, 128, 256};
  int threads = 1, repeats = 5;
  Mamba2ScanParams p;
  p.n_heads = 24;
  p.headdim = 64;
  p.d_state = 128;
  p.n_groups = 1;
  p.dt_max = INFINITY;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--threads")
      threads = std::atoi(argv[i + 1]);
    else if (flag == "--lengths")
      lengths = bench::parse_list(argv[i + 1]);
    else if (flag == "--chunks")
      chunks = bench::parse_list(argv[i + 1]);
    else if (flag == "--repeats")
      repeats = std::atoi(argv[i + 1]);
    else if (flag == "--heads")
      p.n_heads = std::atoll(argv[i + 1]);
    else if (flag == "--headdim")
      p.headdim = std::atoll(argv[i + 1]);
    else if (flag == "--d-state")
      p.d_state = std::atoll(argv[i + 1]);
    else if (flag == "--groups")
      p.n_groups = std::atoll(argv[i + 1]);
  }
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  auto random = [&](size_t n, float offset) {
    std::vector<float> v(n);
    for (float& x : v) x = dist(rng) + offset;
    return v;
  };
  const auto dt_bias = random(p.n_heads, -3.0f), a_log = random(p.n_heads, 1.4f);
  std::vector<float> a(p.n_heads), a_base2(p.n_heads), d_skip(p.n_heads, 1.0f);
  for (int64_t h = 0; h < p.n_heads; ++h) {
    a[h] = -std::exp(a_log[h]);
    a_base2[h] = static_cast<float>(a[h] * M_LOG2E);
  }
  p.dt_bias = dt_bias.data();
  p.a = a.data();
  p.a_base2 = a_base2.data();
  p.d_skip = d_skip.data();
  const int64_t T_max = *std::max_element(lengths.begin(), lengths.end());
  const auto xbc = random(T_max * p.conv_width(), 0.0f), dt_source = random(T_max * p.n_heads, 0.0f);
  std::vector<float> dt(dt_source.size()), y(T_max * p.d_inner()), state(p.n_heads * p.d_state * p.headdim);
  const ComputeContext ctx{threads, bench::isa_from_environment()};

  std::printf("T      sequential pos/s");
  for (int64_t L : chunks) std::printf("  chunked L=%-4lld", static_cast<long long>(L));
  std::printf("\n");
  for (int64_t T : lengths) {
    const size_t variants = chunks.size() + 1;
    std::vector<std::vector<double>> rates(variants);
    for (int r = 0; r <= repeats; ++r) {
      for (size_t v = 0; v < variants; ++v) {
        p.chunk = v == 0 ? 256 : chunks[v - 1];
        std::copy(dt_source.begin(), dt_source.begin() + T * p.n_heads, dt.begin());
        std::fill(state.begin(), state.end(), 0.0f);
        const Mamba2ScanSequence seq{
            T, xbc.data(), p.conv_width(), dt.data(), p.n_heads, state.data(), y.data(), p.d_inner(), v > 0};
        const auto start = std::chrono::steady_clock::now();
        mamba2_scan(ctx, p, std::span(&seq, 1));
        const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        if (r > 0) rates[v].push_back(T / s);
      }
    }
    std::printf("%-6lld %-18.0f", static_cast<long long>(T), bench::median(rates[0]));
    for (size_t v = 1; v < variants; ++v) std::printf("  %-15.0f", bench::median(rates[v]));
    std::printf("\n");
    std::fflush(stdout);
  }
  return 0;
}

// SPDX-License-Identifier: MIT
// The Mamba-3 scan op alone (ops/mamba3_scan.h) at one layer of the 130m-sized shape (24 heads of
// 64 channels, d_state 128, 32 RoPE angles): positions per second of the sequential recurrence
// and of the chunked SSD form at several chunk lengths. Medians over repeats after a warm-up.
//
//   mamba3_op_bench [--threads 1] [--lengths 1,16,64,256,1024] [--chunks 16,32,64,128] [--repeats 5]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "bench_util.h"
#include "ops/mamba3_scan.h"

namespace {

using namespace mb;
using bench::median;
using bench::parse_list;

}  // namespace

int main(int argc, char** argv) {
  std::vector<int64_t> lengths = {1, 16, 64, 256, 1024}, chunks = {16, 32, 64, 128};
  int threads = 1, repeats = 5;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--threads")
      threads = std::atoi(argv[i + 1]);
    else if (flag == "--lengths")
      lengths = parse_list(argv[i + 1]);
    else if (flag == "--chunks")
      chunks = parse_list(argv[i + 1]);
    else if (flag == "--repeats")
      repeats = std::atoi(argv[i + 1]);
  }
  Mamba3ScanParams p;
  p.n_heads = 24;
  p.headdim = 64;
  p.d_state = 128;
  p.n_groups = 1;
  p.n_angles = 32;
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  auto random = [&](size_t n, float offset) {
    std::vector<float> v(n);
    for (float& x : v) x = dist(rng) + offset;
    return v;
  };
  const auto dt_bias = random(p.n_heads, -3.0f), b_bias = random(p.n_heads * p.d_state, 0.0f),
             c_bias = random(p.n_heads * p.d_state, 0.0f), ones = std::vector<float>(p.d_state, 1.0f),
             d_skip = std::vector<float>(p.n_heads, 1.0f);
  p.dt_bias = dt_bias.data();
  p.b_bias = b_bias.data();
  p.c_bias = c_bias.data();
  p.b_norm = ones.data();
  p.c_norm = ones.data();
  p.d_skip = d_skip.data();
  const int64_t T_max = *std::max_element(lengths.begin(), lengths.end());
  const auto proj_source = random(T_max * p.proj_width(), 0.0f);
  std::vector<float> proj(proj_source.size()), y(T_max * p.d_inner()), state(mamba3_state_layout(p).total);
  const ComputeContext ctx{threads, bench::isa_from_environment()};

  std::printf("T      sequential pos/s");
  for (int64_t L : chunks) std::printf("  chunked L=%-4lld", static_cast<long long>(L));
  std::printf("\n");
  for (int64_t T : lengths) {
    // Variant 0 is the sequential order, variant i > 0 the chunked form with chunks[i - 1]. They
    // alternate run by run, so load from other processes on a shared machine hits all alike.
    const size_t variants = chunks.size() + 1;
    std::vector<std::vector<double>> rates(variants);
    for (int r = 0; r <= repeats; ++r) {
      for (size_t v = 0; v < variants; ++v) {
        p.chunk = v == 0 ? 64 : chunks[v - 1];
        std::memcpy(proj.data(), proj_source.data(), sizeof(float) * T * p.proj_width());
        std::fill(state.begin(), state.end(), 0.0f);
        const Mamba3ScanSequence seq{T,        proj.data(), p.proj_width(), state.data(),
                                     y.data(), p.d_inner(), v > 0};
        const auto start = std::chrono::steady_clock::now();
        mamba3_scan(ctx, p, std::span(&seq, 1));
        const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        if (r > 0) rates[v].push_back(T / s);
      }
    }
    std::printf("%-6lld %-18.0f", static_cast<long long>(T), median(rates[0]));
    for (size_t v = 1; v < variants; ++v) std::printf("  %-15.0f", median(rates[v]));
    std::printf("\n");
    std::fflush(stdout);
  }
  return 0;
}

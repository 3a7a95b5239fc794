// SPDX-License-Identifier: MIT
// The Gated DeltaNet op alone (ops/gated_delta_net.h) at one layer of a given shape (default:
// Qwen3.5-9B's, 16 key heads and 32 value heads of 128): positions per second of the sequential
// recurrence for each thread count, one sequence starting from a zero state. The thread counts
// alternate run by run; medians over repeats after a warm-up. MB_ISA selects the instruction set.
//
//   gdn_op_bench [--threads 1,2] [--lengths 1,512] [--repeats 7] [--key-heads 16] [--value-heads 32]
//                [--key-dim 128] [--value-dim 128] [--tiled 0]
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "bench_util.h"
#include "ops/gated_delta_net.h"

int main(int argc, char** argv) {
  using namespace mb;
  std::vector<int64_t> lengths = {1, 512}, threads = {1, 2};
  int repeats = 7;
  GatedDeltaNetParams p;
  p.n_key_heads = 16;
  p.n_value_heads = 32;
  p.key_dim = 128;
  p.value_dim = 128;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--threads")
      threads = bench::parse_list(argv[i + 1]);
    else if (flag == "--lengths")
      lengths = bench::parse_list(argv[i + 1]);
    else if (flag == "--repeats")
      repeats = std::atoi(argv[i + 1]);
    else if (flag == "--key-heads")
      p.n_key_heads = std::atoll(argv[i + 1]);
    else if (flag == "--value-heads")
      p.n_value_heads = std::atoll(argv[i + 1]);
    else if (flag == "--key-dim")
      p.key_dim = std::atoll(argv[i + 1]);
    else if (flag == "--value-dim")
      p.value_dim = std::atoll(argv[i + 1]);
    else if (flag == "--tiled")
      p.tiled_heads = std::atoi(argv[i + 1]) != 0;
  }
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  auto random = [&](size_t n, float offset) {
    std::vector<float> v(n);
    for (float& x : v) x = dist(rng) + offset;
    return v;
  };
  const int64_t nv = p.n_value_heads, T_max = *std::max_element(lengths.begin(), lengths.end());
  // Qwen3.5's initial values: A_log = log(U(0, 16)), dt_bias = 1.
  std::vector<float> a_neg(nv), dt_bias(nv, 1.0f);
  for (float& a : a_neg) a = -8.0f * (dist(rng) + 1.0f);
  p.a_neg = a_neg.data();
  p.dt_bias = dt_bias.data();
  const auto qkv = random(T_max * p.conv_width(), 0.0f), b = random(T_max * nv, 0.0f),
             a = random(T_max * nv, -2.0f);
  std::vector<float> y(T_max * nv * p.value_dim), state(p.state_floats());
  const Isa isa = bench::isa_from_environment();

  std::printf("gated_delta_net nk=%lld nv=%lld dk=%lld dv=%lld %s isa=%s\n",
              static_cast<long long>(p.n_key_heads), static_cast<long long>(nv),
              static_cast<long long>(p.key_dim), static_cast<long long>(p.value_dim),
              p.tiled_heads ? "tiled" : "grouped", isa_name(isa));
  std::printf("T      threads  tok/s\n");
  for (int64_t T : lengths) {
    std::vector<std::vector<double>> rates(threads.size());
    for (int r = 0; r <= repeats; ++r) {
      for (size_t v = 0; v < threads.size(); ++v) {
        std::fill(state.begin(), state.end(), 0.0f);
        const GatedDeltaNetSequence seq{T,        qkv.data(), p.conv_width(), b.data(), nv,
                                        a.data(), nv,         state.data(),   y.data(), nv * p.value_dim};
        const ComputeContext ctx{static_cast<int>(threads[v]), isa};
        // A decode step is short: time enough calls for a measurable interval.
        const int calls = T >= 64 ? 1 : static_cast<int>(256 / T);
        const auto start = std::chrono::steady_clock::now();
        for (int c = 0; c < calls; ++c) gated_delta_net(ctx, p, std::span(&seq, 1));
        const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        if (r > 0) rates[v].push_back(static_cast<double>(T) * calls / s);
      }
    }
    for (size_t v = 0; v < threads.size(); ++v)
      std::printf("%-6lld %-8lld %.0f\n", static_cast<long long>(T), static_cast<long long>(threads[v]),
                  bench::median(rates[v]));
    std::fflush(stdout);
  }
  return 0;
}

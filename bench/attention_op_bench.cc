// SPDX-License-Identifier: MIT
// The attention op alone (ops/attention.h) at one layer of a given shape (default: Nemotron-H-8B's
// and Granite-4.0-H-Tiny's heads, 32 query heads over 8 KV heads of 128 channels): a prefill
// round of T rows from position 0 and a decode step at position T - 1 against a cache of T
// positions held in 256-position blocks as a state holds them. Prints tokens per second and the
// GFLOP/s of the scores and the weighted value sums (4 x head_dim flops per query head per key).
// Medians over repeats after a warm-up.
//
//   attention_op_bench [--threads 1] [--lengths 512,2048,8192] [--repeats 3]
//                      [--heads 32] [--kv-heads 8] [--head-dim 128]
#include <chrono>
#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "bench_util.h"
#include "ops/attention.h"

namespace {

using namespace mb;

constexpr int64_t kBlockPositions = 256;

// Seconds of one call of the op over the given sequence.
double time_call(const ComputeContext& ctx, const AttentionParams& p, const AttentionSequence& s) {
  const auto start = std::chrono::steady_clock::now();
  attention(ctx, p, std::span<const AttentionSequence>(&s, 1));
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<int64_t> lengths = {512, 2048, 8192};
  int threads = 1, repeats = 3;
  AttentionParams p;
  p.n_heads = 32;
  p.n_kv_heads = 8;
  p.head_dim = 128;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--threads")
      threads = std::atoi(argv[i + 1]);
    else if (flag == "--lengths")
      lengths = bench::parse_list(argv[i + 1]);
    else if (flag == "--repeats")
      repeats = std::atoi(argv[i + 1]);
    else if (flag == "--heads")
      p.n_heads = std::atoll(argv[i + 1]);
    else if (flag == "--kv-heads")
      p.n_kv_heads = std::atoll(argv[i + 1]);
    else if (flag == "--head-dim")
      p.head_dim = std::atoll(argv[i + 1]);
  }
  p.scale = 1.0f / std::sqrt(static_cast<float>(p.head_dim));
  ComputeContext ctx;
  ctx.n_threads = threads;
  ctx.isa = bench::isa_from_environment();
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  for (const int64_t T : lengths) {
    const int64_t blocks = (T + kBlockPositions - 1) / kBlockPositions;
    std::vector<float> q(T * p.q_width()), y(T * p.q_width());
    std::vector<float> k(blocks * kBlockPositions * p.kv_width()), v(k.size());
    for (auto* a : {&q, &k, &v})
      for (float& x : *a) x = dist(rng);
    std::vector<const float*> k_blocks(blocks), v_blocks(blocks);
    for (int64_t b = 0; b < blocks; ++b) {
      k_blocks[b] = k.data() + b * kBlockPositions * p.kv_width();
      v_blocks[b] = v.data() + b * kBlockPositions * p.kv_width();
    }
    AttentionSequence prefill{q.data(),
                              p.q_width(),
                              T,
                              0,
                              PositionRows{k_blocks.data(), kBlockPositions, p.kv_width()},
                              PositionRows{v_blocks.data(), kBlockPositions, p.kv_width()},
                              y.data(),
                              p.q_width()};
    AttentionSequence step = prefill;
    step.rows = 1;
    step.position = T - 1;
    std::vector<double> prefill_s, step_s;
    time_call(ctx, p, prefill);
    for (int r = 0; r < repeats; ++r) {
      prefill_s.push_back(time_call(ctx, p, prefill));
      step_s.push_back(time_call(ctx, p, step));
    }
    const double prefill_median = bench::median(prefill_s), step_median = bench::median(step_s);
    // Row r attends to r + 1 keys: T (T + 1) / 2 query-key pairs per head in the prefill.
    const double prefill_flops = 4.0 * p.head_dim * p.n_heads * (0.5 * T * (T + 1.0));
    const double step_flops = 4.0 * p.head_dim * p.n_heads * T;
    std::printf(
        "{\"T\": %lld, \"threads\": %d, \"heads\": %lld, \"kv_heads\": %lld, \"head_dim\": %lld, "
        "\"prefill_tok_s\": %.1f, \"prefill_gflop_s\": %.2f, \"step_us\": %.1f, \"step_gflop_s\": %.2f}\n",
        static_cast<long long>(T), threads, static_cast<long long>(p.n_heads),
        static_cast<long long>(p.n_kv_heads), static_cast<long long>(p.head_dim), T / prefill_median,
        prefill_flops / prefill_median * 1e-9, step_median * 1e6, step_flops / step_median * 1e-9);
    std::fflush(stdout);
  }
  return 0;
}

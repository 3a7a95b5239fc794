// SPDX-License-Identifier: MIT
// The measurements of BENCHMARKS.md's hybrid table with one load of the model: for each round,
// each thread count (alternating, so a slow spell of a shared machine hits both) and each prompt
// length, one run of engine/benchmark.h's harness with the prefill profiled. The first length is
// the decode case: its run also decodes --gen-len tokens at that context and feeds --step-tokens
// prompt tokens through the step loop (the prefill / step-loop ratio); longer lengths only
// prefill. Prints one JSON object per run; bench/hybrid_table.py takes the medians.
//
//   hybrid_bench --model DIR [--dtype bf16] [--threads 1,2] [--lengths 512,2048,8192]
//                [--rounds 3,2,1] [--gen-len 16] [--step-tokens 16]
//
// --rounds gives each length its number of rounds (a length runs in the last rounds only, so a
// single 8192-token run comes after the machine has run the shorter ones). Before the rounds, one
// short untimed run per thread count pages the weights in.
#include <chrono>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "bench_util.h"
#include "engine/benchmark.h"

namespace {

using namespace mb;

nlohmann::json result_json(const BenchResult& r) {
  nlohmann::json shares = nlohmann::json::object();
  for (const auto& [kind, share] : r.prefill_block_shares) shares[kind] = share;
  return {{"prefill_tok_s", r.prefill_tok_s},
          {"decode_tok_s", r.decode_tok_s},
          {"step_prefill_tok_s", r.step_prefill_tok_s},
          {"prefill_speedup_vs_step", r.prefill_speedup},
          {"prefill_block_shares", shares},
          {"prefill_attention_core_share", r.prefill_attention_core_share},
          {"step_matrix_bytes", r.step_matrix_bytes},
          {"kv_bytes_per_position", r.kv_bytes_per_position},
          {"fixed_state_bytes", r.fixed_state_bytes},
          {"decode_read_bytes_per_token", r.decode_read_bytes}};
}

}  // namespace

int main(int argc, char** argv) {
  std::string model_dir, dtype;
  std::vector<int64_t> threads = {1, 2}, lengths = {512, 2048, 8192}, rounds = {3, 2, 1};
  int64_t gen_len = 16, step_tokens = 16;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--model")
      model_dir = argv[i + 1];
    else if (flag == "--dtype")
      dtype = argv[i + 1];
    else if (flag == "--threads")
      threads = bench::parse_list(argv[i + 1]);
    else if (flag == "--lengths")
      lengths = bench::parse_list(argv[i + 1]);
    else if (flag == "--rounds")
      rounds = bench::parse_list(argv[i + 1]);
    else if (flag == "--gen-len")
      gen_len = std::atoll(argv[i + 1]);
    else if (flag == "--step-tokens")
      step_tokens = std::atoll(argv[i + 1]);
    else {
      std::fprintf(stderr, "hybrid_bench: unknown flag %s\n", flag.c_str());
      return 2;
    }
  }
  if (model_dir.empty() || lengths.empty() || rounds.size() != lengths.size() || threads.empty()) {
    std::fprintf(stderr,
                 "usage: hybrid_bench --model DIR [--dtype D] [--threads 1,2] [--lengths 512,2048,8192] "
                 "[--rounds 3,2,1] (one round count per length) [--gen-len 16] [--step-tokens 16]\n");
    return 2;
  }
  try {
    LoadOptions load;
    if (!dtype.empty()) load.weight_dtype = parse_dtype(dtype);
    const auto load_start = std::chrono::steady_clock::now();
    const auto model = Model::load(model_dir, load);
    const double load_s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - load_start).count();
    const Isa isa = bench::isa_from_environment();
    std::fprintf(stderr, "hybrid_bench: %s loaded as %s in %.1f s\n", model_dir.c_str(),
                 std::string(dtype_name(model->matrix_dtype())).c_str(), load_s);
    for (const int64_t t : threads) {
      BenchOptions warm;
      warm.prompt_len = 64;
      warm.gen_len = 2;
      warm.step_tokens = 1;
      warm.repeats = 1;
      warm.warmups = 0;
      run_benchmark(*model, ComputeContext{static_cast<int>(t), isa}, warm);
    }
    int64_t most_rounds = 0;
    for (const int64_t r : rounds) most_rounds = std::max(most_rounds, r);
    for (int64_t round = 0; round < most_rounds; ++round)
      for (const int64_t t : threads)
        for (size_t i = 0; i < lengths.size(); ++i) {
          if (round < most_rounds - rounds[i]) continue;
          BenchOptions o;
          o.prompt_len = lengths[i];
          o.gen_len = i == 0 ? gen_len : 1;
          o.step_tokens = i == 0 ? step_tokens : 1;
          o.repeats = 1;
          o.warmups = 0;
          o.profile = true;
          const BenchResult r = run_benchmark(*model, ComputeContext{static_cast<int>(t), isa}, o);
          nlohmann::json line = result_json(r);
          line["model"] = model_dir;
          line["dtype"] = std::string(dtype_name(model->matrix_dtype()));
          line["threads"] = t;
          line["prompt_len"] = lengths[i];
          line["gen_len"] = o.gen_len;
          line["step_tokens"] = r.step_tokens;
          line["round"] = round;
          line["load_s"] = load_s;
          line["weight_bytes"] = model->matrix_bytes();
          line["n_layer"] = model->config().n_layer;
          std::printf("%s\n", line.dump().c_str());
          std::fflush(stdout);
        }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "hybrid_bench: %s\n", e.what());
    return 1;
  }
  return 0;
}

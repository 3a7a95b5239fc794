// SPDX-License-Identifier: MIT
// Mamba-3 prefill throughput of the sequential recurrence against the chunked SSD form at a
// range of prompt lengths, plus decode throughput; medians over repeats after a warm-up. The
// crossover it shows is what CpuBackend::mamba3_prefers_chunked encodes.
//
//   mamba3_scan_bench MODEL_DIR [--threads 1,2] [--lengths 64,256,1024,4096] [--repeats 3]
//                     [--decode 32] [--ssd-chunk 0]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "backends/cpu/cpu_backend.h"
#include "bench_util.h"
#include "core/error.h"
#include "core/profile.h"
#include "model/blocks/mamba3_block.h"
#include "model/model.h"

namespace {

using namespace mb;

using bench::median;
using bench::parse_list;

template <class F>
double seconds(F&& body) {
  const auto start = std::chrono::steady_clock::now();
  body();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr,
                 "usage: %s MODEL_DIR [--threads 1,2] [--lengths 64,256,1024,4096] [--repeats 3] [--decode "
                 "32] [--ssd-chunk 0]\n",
                 argv[0]);
    return 2;
  }
  std::vector<int64_t> threads = {1, 2}, lengths = {64, 256, 1024, 4096};
  int64_t repeats = 3, decode_tokens = 32, ssd_chunk = 0;
  for (int i = 2; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--threads")
      threads = parse_list(argv[i + 1]);
    else if (flag == "--lengths")
      lengths = parse_list(argv[i + 1]);
    else if (flag == "--repeats")
      repeats = std::strtoll(argv[i + 1], nullptr, 10);
    else if (flag == "--decode")
      decode_tokens = std::strtoll(argv[i + 1], nullptr, 10);
    else if (flag == "--ssd-chunk")
      ssd_chunk = std::strtoll(argv[i + 1], nullptr, 10);
    else {
      std::fprintf(stderr, "unknown flag %s\n", flag.c_str());
      return 2;
    }
  }
  try {
    auto model = Model::load(argv[1]);
    const int64_t V = model->config().vocab_size;
    std::vector<int32_t> prompt(*std::max_element(lengths.begin(), lengths.end()));
    uint64_t x = 88172645463325252ull;
    for (auto& t : prompt) {
      x ^= x << 13, x ^= x >> 7, x ^= x << 17;
      t = static_cast<int32_t>(x % V);
    }
    std::printf(
        "threads  T      sequential tok/s  chunked tok/s  chunked/sequential  scan us/token: sequential  "
        "chunked\n");
    for (int64_t n_threads : threads) {
      ComputeContext ctx{static_cast<int>(n_threads), bench::isa_from_environment()};
      Workspace ws;
      std::vector<std::vector<float>> out;
      for (int64_t T : lengths) {
        const std::span<const int32_t> tokens(prompt.data(), T);
        // The two orders alternate run by run, so load from other processes on a shared machine
        // hits both alike; the ratio is the median of the per-pair ratios.
        // The per-phase profile also gives the time of the scan phase alone (all layers).
        std::vector<double> runs[2], scan_us[2], ratios;
        for (int64_t r = 0; r <= repeats; ++r) {
          double pair[2];
          for (ScanForm scan : {ScanForm::Sequential, ScanForm::Chunked}) {
            SequenceState state = model->new_state();
            SequenceInput input{&state, tokens, {}};
            PhaseProfile profile(model->phase_names());
            ctx.profile = &profile;
            pair[scan == ScanForm::Chunked] = seconds([&] {
              model->forward(ctx, std::span(&input, 1), {OutputKind::LogitsLast, 0, scan, ssd_chunk}, ws,
                             out);
            });
            ctx.profile = nullptr;
            if (r > 0)
              scan_us[scan == ScanForm::Chunked].push_back(profile.seconds_of(Mamba3Block::kMixerPhaseName) *
                                                           1e6 / T);
          }
          if (r == 0) continue;  // warm-up
          runs[0].push_back(T / pair[0]);
          runs[1].push_back(T / pair[1]);
          ratios.push_back(pair[0] / pair[1]);
        }
        const double rate[2] = {median(runs[0]), median(runs[1])};
        const double ratio = median(ratios);
        std::printf("%-8lld %-6lld %-17.1f %-14.1f %-19.2f %-26.0f %.0f\n", static_cast<long long>(n_threads),
                    static_cast<long long>(T), rate[0], rate[1], ratio, median(scan_us[0]),
                    median(scan_us[1]));
        std::fflush(stdout);
      }
      std::vector<double> decode;
      for (int64_t r = 0; r <= repeats; ++r) {
        SequenceState state = model->new_state();
        int32_t token = prompt[0];
        const double s = seconds([&] {
          for (int64_t i = 0; i < decode_tokens; ++i) {
            SequenceInput next{&state, std::span(&token, 1), {}};
            model->forward(ctx, std::span(&next, 1), {OutputKind::LogitsLast, 0}, ws, out);
            token = static_cast<int32_t>(std::max_element(out[0].begin(), out[0].end()) - out[0].begin());
          }
        });
        if (r > 0) decode.push_back(decode_tokens / s);
      }
      std::printf("threads %lld decode %.2f tok/s\n", static_cast<long long>(n_threads), median(decode));
      std::fflush(stdout);
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  return 0;
}

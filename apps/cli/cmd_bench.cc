// SPDX-License-Identifier: MIT
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "commands.h"
#include "core/isa_flag.h"
#include "engine/benchmark.h"

namespace mb::cli {

namespace {

// Device time per phase (from timestamp queries) of one prefill call and one decode step, into
// `out` and, when `print`, onto stdout.
void add_device_phases(const BenchResult& r, bool print, nlohmann::json& out) {
  if (r.device_prefill.empty() && r.device_decode_step.empty()) return;
  auto device_phases = [](const std::vector<DevicePhaseTime>& times) {
    nlohmann::json phases = nlohmann::json::object();
    for (const DevicePhaseTime& time : times)
      phases[time.phase] = {{"ms", time.milliseconds}, {"dispatches", time.dispatches}};
    return phases;
  };
  out["device_phases"] = {{"prefill", device_phases(r.device_prefill)},
                          {"decode_step", device_phases(r.device_decode_step)}};
  if (!print) return;
  for (const auto& [call, times] :
       {std::pair{"prefill", &r.device_prefill}, std::pair{"decode step", &r.device_decode_step}})
    for (const DevicePhaseTime& time : *times)
      std::printf("  device %-12s %-12s %9.3f ms  %4lld dispatches\n", call, time.phase.c_str(),
                  time.milliseconds, static_cast<long long>(time.dispatches));
}

// --profile: prefill's time per phase and its split by kind of block, into `out` and, when
// `print`, onto stdout.
void add_profile(const BenchResult& r, bool print, nlohmann::json& out) {
  nlohmann::json phases = nlohmann::json::object();
  const double total = r.prefill_phases.total();
  for (size_t i = 0; i < r.prefill_phases.seconds.size(); ++i) {
    const double seconds = r.prefill_phases.seconds[i];
    if (seconds <= 0) continue;
    phases[r.prefill_phases.name(static_cast<PhaseId>(i))] = {{"ms", seconds * 1e3},
                                                              {"share", seconds / total}};
  }
  out["prefill_phases"] = phases;
  nlohmann::json blocks = nlohmann::json::object();
  for (const auto& [kind, share] : r.prefill_block_shares) blocks[kind] = share;
  out["prefill_block_shares"] = blocks;
  out["prefill_attention_core_share"] = r.prefill_attention_core_share;
  if (!print) return;
  for (const auto& [name, value] : phases.items())
    std::printf("  %-30s %9.2f ms  %5.1f%%\n", name.c_str(), value["ms"].get<double>(),
                100 * value["share"].get<double>());
  std::printf("  by block:");
  for (const auto& [kind, share] : r.prefill_block_shares)
    std::printf(" %s %.1f%%", kind.c_str(), 100 * share);
  std::printf(" (attention core %.1f%%)\n", 100 * r.prefill_attention_core_share);
}

}  // namespace

void add_bench(CLI::App& app) {
  struct Args {
    std::string model, dtype, scan = "sequential", device = "cpu", isa = "auto";
    BenchOptions options;
    int threads = 0;
    bool json = false;
  };
  auto args = std::make_shared<Args>();
  CLI::App* cmd = app.add_subcommand("bench", "Measure prefill, decode and step-loop throughput");
  cmd->add_option("-m,--model", args->model, "Checkpoint folder or .gguf file")->required();
  cmd->add_option("--prompt-len", args->options.prompt_len, "Prompt length")->capture_default_str();
  cmd->add_option("--gen-len", args->options.gen_len, "Tokens to decode")->capture_default_str();
  cmd->add_option("-t,--threads", args->threads, "Threads (0 = all cores)");
  add_device_option(cmd, args->device);
  cmd->add_option("--dtype", args->dtype,
                  "Weight storage: f32 | bf16 | f16 | q8_0 | q4_0 | q4_k | q6_k (default: as stored)");
  cmd->add_option("--chunk", args->options.chunk, "Prefill chunk (0 = whole prompt)")->capture_default_str();
  cmd->add_option("--repeats", args->options.repeats, "Timed repeats (medians reported)")
      ->capture_default_str();
  cmd->add_option("--warmups", args->options.warmups, "Untimed runs before the timed repeats")
      ->capture_default_str();
  cmd->add_option("--step-tokens", args->options.step_tokens,
                  "Prompt tokens fed through the step loop (default min(prompt-len, 128))");
  cmd->add_option("--scan", args->scan, "Mamba-2/Mamba-3 prefill form: sequential | chunked | auto")
      ->capture_default_str();
  cmd->add_option("--ssd-chunk", args->options.ssd_chunk,
                  "Chunked-scan (SSD) chunk length (0 = the config's)");
  cmd->add_option("--batch", args->options.batch, "Sequences decoded together (decode tok/s counts all)")
      ->capture_default_str();
  cmd->add_option("--isa", args->isa,
                  "CPU kernels: auto | avx512 | avx2 | scalar (| neon): a narrower set than the CPU's best "
                  "measures another machine's path here")
      ->capture_default_str();
  cmd->add_flag("--json", args->json, "Print one JSON object");
  cmd->add_flag("--profile", args->options.profile, "Break prefill time down by phase");
  cmd->callback([args] {
    // Lengths are bounded so that a typo fails here with the flag's name rather than as an
    // allocation failure deep inside the benchmark.
    constexpr int64_t kMaxLength = int64_t{1} << 24;
    const BenchOptions& o = args->options;
    check_flag_range("--prompt-len", o.prompt_len, 1, kMaxLength);
    check_flag_range("--gen-len", o.gen_len, 1, kMaxLength);
    check_flag_range("--batch", o.batch, 1, 4096);
    check_flag_range("--repeats", o.repeats, 1, 1000);
    check_flag_range("--warmups", o.warmups, 0, 1000);
    check_flag_range("--chunk", o.chunk, 0, INT64_MAX, "0 = the whole prompt");
    check_flag_range("--step-tokens", o.step_tokens, 0, INT64_MAX, "0 = min(prompt-len, 128)");
    check_flag_range("--ssd-chunk", o.ssd_chunk, 0, kMaxSsdChunk, "0 = the config's chunk_size");
    args->options.scan = parse_scan_form(args->scan);
    auto ctx = make_context(args->threads);
    ctx.isa = parse_isa(args->isa);
    // Load time includes quantizing the matrices when --dtype asks for a quantized type.
    const auto load_start = std::chrono::steady_clock::now();
    auto model = load_model(args->model, args->dtype, args->device);
    const double load_s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - load_start).count();
    const BenchResult r = run_benchmark(*model, ctx, args->options);
    nlohmann::json out = {{"model", args->model},
                          {"dtype", std::string(dtype_name(model->matrix_dtype()))},
                          {"threads", ctx.n_threads},
                          {"isa", isa_name(ctx.isa)},
                          {"prompt_len", args->options.prompt_len},
                          {"gen_len", args->options.gen_len},
                          {"chunk", args->options.chunk},
                          {"scan", args->scan},
                          {"repeats", args->options.repeats},
                          {"prefill_tok_s", r.prefill_tok_s},
                          {"decode_tok_s", r.decode_tok_s},
                          {"step_prefill_tok_s", r.step_prefill_tok_s},
                          {"step_tokens", r.step_tokens},
                          {"prefill_speedup_vs_step", r.prefill_speedup},
                          {"load_s", load_s},
                          {"weight_bytes_per_token", model->matrix_bytes()},
                          {"step_matrix_bytes", r.step_matrix_bytes},
                          {"kv_bytes_per_position", r.kv_bytes_per_position},
                          {"fixed_state_bytes", r.fixed_state_bytes},
                          {"decode_read_bytes_per_token", r.decode_read_bytes},
                          {"decode_read_gb_s", r.decode_read_bytes * r.decode_tok_s / 1e9},
                          {"warmups", args->options.warmups},
                          {"batch", args->options.batch},
                          {"state_floats_per_sequence", model->state_floats()},
                          {"state_layout", model->state_layout().describe()},
                          {"device", device_description(*model)}};
    add_device_phases(r, !args->json, out);
    if (args->options.profile) add_profile(r, !args->json, out);
    if (args->json) {
      std::printf("%s\n", out.dump().c_str());
    } else {
      std::printf(
          "prefill %.1f tok/s | decode %.2f tok/s | step-loop prefill %.2f tok/s | speedup %.1fx | "
          "%s weights %.1f MB, %.1f MB read per decode step (%.2f GB/s) | load %.2f s\n",
          r.prefill_tok_s, r.decode_tok_s, r.step_prefill_tok_s, r.prefill_speedup,
          std::string(dtype_name(model->matrix_dtype())).c_str(), model->matrix_bytes() / 1e6,
          r.decode_read_bytes / 1e6, r.decode_read_bytes * r.decode_tok_s / 1e9, load_s);
    }
  });
}

}  // namespace mb::cli

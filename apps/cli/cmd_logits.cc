// SPDX-License-Identifier: MIT
#include <cstdint>

#include "commands.h"
#include "core/error.h"
#include "io/file_io.h"
#include "io/npy.h"

namespace mb::cli {

void add_logits(CLI::App& app) {
  struct Args {
    std::string model, tokens, out, dtype, mode = "prefill", scan = "sequential", device = "cpu";
    bool all_positions = false;
    int threads = 0;
    int64_t chunk = 0, ssd_chunk = 0;
  };
  auto args = std::make_shared<Args>();
  CLI::App* cmd = app.add_subcommand("logits", "Write the logits of a token sequence to a .npy file");
  cmd->add_option("-m,--model", args->model, "Checkpoint folder or .gguf file")->required();
  cmd->add_option("--tokens", args->tokens, "Comma-separated token ids")->required();
  cmd->add_option("--out", args->out, "Output .npy (float32 [T, vocab] or [1, vocab])")->required();
  cmd->add_flag("--all-positions", args->all_positions, "Logits at every position instead of the last");
  cmd->add_option("-t,--threads", args->threads, "Threads (0 = all cores)");
  add_device_option(cmd, args->device);
  cmd->add_option("--dtype", args->dtype,
                  "Weight storage: f32 | bf16 | f16 | q8_0 | q4_0 | q4_k | q6_k (default: as stored)");
  cmd->add_option("--mode", args->mode, "prefill (one batched pass) | step (one decode step per token)")
      ->capture_default_str();
  cmd->add_option("--chunk", args->chunk, "Prefill chunk in positions (0 = whole input)");
  cmd->add_option("--scan", args->scan,
                  "Mamba-2/Mamba-3 prefill recurrence: sequential (bit-identical to decode) | chunked | auto")
      ->capture_default_str();
  cmd->add_option("--ssd-chunk", args->ssd_chunk,
                  "Chunked-scan (SSD) chunk length (0 = the config's chunk_size)");
  cmd->callback([args] {
    if (args->mode != "prefill" && args->mode != "step") throw Error("--mode must be prefill or step");
    check_flag_range("--chunk", args->chunk, 0, INT64_MAX, "0 = the whole input");
    check_flag_range("--ssd-chunk", args->ssd_chunk, 0, kMaxSsdChunk, "0 = the config's chunk_size");
    const ScanForm scan = parse_scan_form(args->scan);
    check_writable_output(args->out, "--out");
    const auto tokens = parse_token_list(args->tokens);
    const auto ctx = make_context(args->threads);
    auto model = load_model(args->model, args->dtype, args->device);
    const int64_t vocab = model->config().vocab_size;
    SequenceState state = model->new_state();
    Workspace ws;
    std::vector<std::vector<float>> out;
    std::vector<float> logits;
    const OutputKind kind = args->all_positions ? OutputKind::LogitsAll : OutputKind::LogitsLast;
    if (args->mode == "prefill") {
      SequenceInput input{&state, tokens, {}};
      ForwardOptions options{kind, args->chunk, scan, args->ssd_chunk};
      model->forward(ctx, std::span(&input, 1), options, ws, out);
      logits = std::move(out[0]);
    } else {
      for (int32_t id : tokens)
        if (id < 0 || id >= vocab)
          throw Error("token id " + std::to_string(id) + " is outside the vocabulary [0, " +
                      std::to_string(vocab) + ")");
      for (size_t t = 0; t < tokens.size(); ++t) {
        SequenceInput input{&state, std::span(&tokens[t], 1), {}};
        model->forward(ctx, std::span(&input, 1), {OutputKind::LogitsLast, 0}, ws, out);
        if (args->all_positions || t + 1 == tokens.size())
          logits.insert(logits.end(), out[0].begin(), out[0].end());
      }
    }
    const int64_t rows = static_cast<int64_t>(logits.size()) / vocab;
    write_npy_f32(args->out, logits, {rows, vocab});
  });
}

}  // namespace mb::cli

// SPDX-License-Identifier: MIT
// `mambacpp serve`: the OpenAI-compatible HTTP server (src/server), with llama-server's flags.
#include <pthread.h>

#include <csignal>
#include <cstdio>
#include <filesystem>
#include <optional>

#include "chat/chat_template.h"
#include "commands.h"
#include "core/error.h"
#include "engine/context_limit.h"
#include "engine/gguf_tokenizer.h"
#include "engine/scheduler.h"
#include "server/http_server.h"
#include "tokenizer/tokenizer.h"

namespace mb::cli {

void normalize_serve_arguments(int argc, char** argv) {
  // llama-server spells the slot count "-np"; CLI11 only takes one-letter short names, so the
  // spelling is mapped to the long name before parsing (only for `serve`).
  static char parallel[] = "--parallel";
  bool serving = false;
  for (int i = 1; i < argc; ++i) {
    if (std::string(argv[i]) == "serve") serving = true;
    if (serving && std::string(argv[i]) == "-np") argv[i] = parallel;
  }
}

namespace {

struct ServeArgs {
  std::string model, host = "127.0.0.1", api_key, slot_save_path, dtype, alias, device = "cpu";
  std::string pooling = "mean";  // --pooling: how /v1/embeddings pools the hidden states
  bool api_key_given = false;
  bool slot_persist = false;  // an empty --api-key (an unset variable) must not turn the key off
  int port = 8080, parallel = 4, threads = 0, timeout = 600, read_timeout = 10, max_conns_per_ip = 64;
  int64_t ctx = 0, cache_every = 512, cache_mb = 256, slot_persist_mb = 1024, max_queue = 64,
          max_body = 8 << 20, batch = 512;
  int64_t max_connections = 4096;
  std::vector<std::string> trusted_proxies;
  std::string reasoning_format = "auto";  // server/chat_tools.h
  int reasoning_budget = -1;
};

void check_serve_flags(const ServeArgs& a) {
  check_flag_range("-c/--ctx-size", a.ctx, 0, INT32_MAX, "0 = the model's default");
  check_flag_range("--port", a.port, 0, 65535, "0 = any free port");
  check_flag_range("-np/--parallel", a.parallel, 1, 1024);
  check_flag_range("--timeout", a.timeout, 1, 86400);
  check_flag_range("--read-timeout", a.read_timeout, 1, 3600);
  check_flag_range("--max-conns-per-ip", a.max_conns_per_ip, 0, 65536, "0 = no cap");
  check_flag_range("--max-connections", a.max_connections, 16, 1 << 20);
  check_flag_range("--cache-every", a.cache_every, 0, INT64_MAX, "0 = only at the end of a request");
  check_flag_range("--cache-mb", a.cache_mb, 0, 1 << 24, "0 = no prefix cache");
  check_flag_range("--max-queue", a.max_queue, 0, 1 << 20);
  check_flag_range("--max-body", a.max_body, 1024, int64_t{1} << 32);
  check_flag_range("-b/--batch-size", a.batch, 1, 1 << 20);
  check_flag_range("--reasoning-budget", a.reasoning_budget, -1, INT32_MAX, "-1 = unlimited");
  server::parse_reasoning_format(a.reasoning_format);
  if (a.host.empty()) throw Error("--host must not be empty");
  if (a.api_key_given && a.api_key.empty())
    throw Error("--api-key must not be empty (leave the flag out to serve without a key)");
  if (!a.slot_save_path.empty() && !std::filesystem::is_directory(a.slot_save_path))
    throw Error("--slot-save-path: '" + a.slot_save_path + "' is not a directory");
  check_flag_range("--slot-persist-mb", a.slot_persist_mb, 1, 1 << 24);
  if (a.pooling != "mean" && a.pooling != "last")
    throw Error("--pooling must be 'mean' or 'last', got '" + a.pooling + "'");
  if (a.slot_persist && a.slot_save_path.empty())
    throw Error("--slot-persist needs --slot-save-path (the folder the replicas share)");
}

// Blocks the signals that end the server in every thread, so that the main thread can wait for
// them with sigwait() and shut down in order instead of being interrupted wherever it is.
sigset_t block_shutdown_signals() {
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  // A client that disconnects must not kill the server with SIGPIPE on the next write.
  std::signal(SIGPIPE, SIG_IGN);
  return signals;
}

void serve(const ServeArgs& a) {
  check_serve_flags(a);
  const ComputeContext ctx = make_context(a.threads);
  const sigset_t signals = block_shutdown_signals();

  server::ServerOptions options;
  options.host = a.host;
  options.port = a.port;
  options.api_key = a.api_key;
  options.timeout_seconds = a.timeout;
  options.read_timeout_seconds = a.read_timeout;
  options.max_connections_per_ip = a.max_conns_per_ip;
  options.max_connections = static_cast<size_t>(a.max_connections);
  options.trusted_proxies = a.trusted_proxies;
  options.max_body_bytes = static_cast<size_t>(a.max_body);
  // Every slot and every queued request holds a connection thread while it streams.
  options.http_threads = static_cast<int>(std::min<int64_t>(a.parallel + a.max_queue + 8, 4096));
  options.model_id = !a.alias.empty() ? a.alias : std::filesystem::path(a.model).filename().string();
  if (options.model_id.empty())
    options.model_id = std::filesystem::path(a.model).parent_path().filename().string();
  options.defaults.max_context = a.ctx;
  options.defaults.reasoning = {server::parse_reasoning_format(a.reasoning_format), a.reasoning_budget};

  // Listening starts before the model loads, so /health reports "loading" meanwhile.
  server::HttpServer http(options);
  http.bind();
  std::printf("mambacpp serve: listening on %s\n", http.url().c_str());
  std::fflush(stdout);
  http.start();

  auto model = load_model(a.model, a.dtype, a.device);
  if (model->input_dim() > 0) throw Error(a.model + " takes feature rows, not tokens: it cannot be served");
  // The tokenizer `run` and `generate` use: a GGUF file's embedded one, or the folder's.
  const Tokenizer tokenizer = load_tokenizer(a.model);
  server::ServedModel served;
  served.tokenizer = &tokenizer;
  // Prompt ids are left to Scheduler::submit, which applies the rule `run` and `generate` apply
  // (engine/request_decoder.h) with the same message; the HTTP layer's own check, against the
  // model's vocab_size alone, would let padding ids through to it anyway.
  served.vocab_size = 0;
  served.chat = server::load_served_chat_template(a.model);
  std::fprintf(stderr, "%s\n", server::describe_chat_template(served.chat).c_str());
  if (served.chat.is_plain())
    std::fprintf(stderr, "%s\n", server::plain_format_warning(served.chat, a.model).c_str());
  if (!served.chat.error.empty())
    std::fprintf(stderr, "warning: %s; /v1/chat/completions will answer 400\n", served.chat.error.c_str());
  // Without -c, the model's default: one request must not grow a hybrid's KV cache without bound.
  ContextLimit context{a.ctx, "-c"};
  if (a.ctx == 0)
    context =
        default_context_limit(*model, a.parallel, available_memory_bytes(), trained_context_length(a.model));
  served.max_context = context.tokens;
  served.embeddings = {&tokenizer, model->config().vocab_size, model->config().d_model};
  served.pooling = parse_pooling(a.pooling);
  if (context.tokens > 0)
    std::printf("mambacpp serve: context %lld tokens (from %s)\n", static_cast<long long>(context.tokens),
                context.source.c_str());
  else
    std::printf("mambacpp serve: context unlimited (%s)\n", context.source.c_str());
  std::fflush(stdout);
  SchedulerOptions scheduler_options;
  scheduler_options.max_active = a.parallel;
  scheduler_options.step_token_budget = a.batch;
  scheduler_options.max_waiting = static_cast<size_t>(a.max_queue);
  scheduler_options.max_context = context.tokens;
  scheduler_options.cache_every = a.cache_every;
  scheduler_options.cache_bytes = static_cast<size_t>(a.cache_mb) << 20;
  scheduler_options.slot_save_path = a.slot_save_path;
  scheduler_options.slot_persist = a.slot_persist;
  scheduler_options.slot_persist_bytes = static_cast<uint64_t>(a.slot_persist_mb) << 20;
  Scheduler scheduler(*model, &tokenizer, ctx, scheduler_options);
  scheduler.start();
  served.scheduler = &scheduler;
  http.set_model(std::move(served));
  std::printf("mambacpp serve: model %s loaded, ready (%d slots, %d threads, device %s)\n",
              options.model_id.c_str(), a.parallel, ctx.n_threads, device_description(*model).c_str());
  std::fflush(stdout);

  int signal_number = 0;
  sigwait(&signals, &signal_number);
  std::printf("mambacpp serve: %s received, finishing the requests in flight\n",
              signal_number == SIGTERM ? "SIGTERM" : "SIGINT");
  std::fflush(stdout);
  const bool drained = http.drain(std::chrono::seconds(a.timeout));
  scheduler.stop(drained);
  http.stop();
  std::printf("mambacpp serve: stopped\n");
  std::fflush(stdout);
}

}  // namespace

void add_serve(CLI::App& app) {
  auto args = std::make_shared<ServeArgs>();
  CLI::App* cmd = app.add_subcommand("serve", "Serve the model over an OpenAI-compatible HTTP API");
  cmd->add_option("-m,--model", args->model, "Checkpoint folder or .gguf file")->required();
  cmd->add_option("-c,--ctx-size", args->ctx,
                  "Most tokens per request, prompt plus generated (0 = the model's: its trained length, or "
                  "what free memory holds where its state grows; no limit where it does not)")
      ->capture_default_str();
  add_jinja_flag(cmd);
  cmd->add_option("--host", args->host, "Address to listen on")->capture_default_str();
  cmd->add_option("--port", args->port, "Port to listen on (0 = any free port)")->capture_default_str();
  cmd->add_option("--parallel", args->parallel, "Requests generated at once (-np)")->capture_default_str();
  cmd->add_option("-t,--threads", args->threads, "Threads (0 = all cores)");
  cmd->add_option("-b,--batch-size", args->batch,
                  "Positions per scheduler step (decode rows, then prompt chunks)")
      ->capture_default_str();
  CLI::Option* api_key = cmd->add_option(
      "--api-key", args->api_key, "Require this key on every endpoint but /health and the chat page (GET /)");
  cmd->add_option("--timeout", args->timeout, "Write timeout of a response, and of the shutdown drain (s)")
      ->capture_default_str();
  cmd->add_option("--read-timeout", args->read_timeout,
                  "A request's head must arrive within this, its body keep arriving (s; else 408 and close)")
      ->capture_default_str();
  cmd->add_option("--max-conns-per-ip", args->max_conns_per_ip,
                  "Open connections of one client address past which new ones are closed (0 = no cap)")
      ->capture_default_str();
  cmd->add_option("--max-connections", args->max_connections,
                  "Connections held at once, past which the one that has waited longest for its request "
                  "is closed (at most the open-file limit less 192)")
      ->capture_default_str();
  cmd->add_option("--trusted-proxy", args->trusted_proxies,
                  "A proxy (address or CIDR range, repeatable) whose X-Forwarded-For names the client: "
                  "--max-conns-per-ip then counts that client's requests in flight")
      ->allow_extra_args(false);
  cmd->add_option("--cache-every", args->cache_every, "Cache the state every N prompt tokens")
      ->capture_default_str();
  cmd->add_option("--cache-mb", args->cache_mb, "Prefix state cache size in MiB (0 = off)")
      ->capture_default_str();
  cmd->add_option("--slot-save-path", args->slot_save_path, "Folder for saved prefix states");
  // Opt-in rather than implied by --slot-save-path: llama-server's flag of that name only enables
  // the explicit save and restore calls, and operators would not expect it to write files on
  // every request.
  cmd->add_flag("--slot-persist", args->slot_persist,
                "Write each conversation's prefix states to --slot-save-path and resume cache misses "
                "from states any server sharing the folder wrote there (replicas; see deploy/)");
  cmd->add_option("--slot-persist-mb", args->slot_persist_mb,
                  "Most MiB the --slot-persist files may take (oldest used evicted first)")
      ->capture_default_str();
  cmd->add_option("--max-queue", args->max_queue, "Waiting requests past which new ones get 503")
      ->capture_default_str();
  cmd->add_option("--max-body", args->max_body, "Largest request body in bytes (larger: 413)")
      ->capture_default_str();
  cmd->add_option("--dtype", args->dtype,
                  "Weight storage: f32 | bf16 | f16 | q8_0 | q4_0 | q4_k | q6_k (default: as stored)");
  add_device_option(cmd, args->device);
  cmd->add_option("--pooling", args->pooling, "How /v1/embeddings pools the final hidden state: mean or last")
      ->capture_default_str();
  cmd->add_option("--reasoning-format", args->reasoning_format,
                  "auto: a reply's thinking block goes to reasoning_content where the chat template has "
                  "thinking markers; none: it stays in the content")
      ->capture_default_str();
  cmd->add_option("--reasoning-budget", args->reasoning_budget,
                  "Tokens of thinking after which the block is closed (-1 = unlimited, 0 = none)")
      ->capture_default_str();
  cmd->add_option("-a,--alias", args->alias,
                  "Model name reported by /v1/models (default: the folder's name)");
  cmd->callback([args, api_key] {
    args->api_key_given = api_key->count() > 0;
    serve(*args);
  });
}

}  // namespace mb::cli

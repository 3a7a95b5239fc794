// SPDX-License-Identifier: MIT
// `mambacpp chat`: a conversation on the terminal (or over a pipe), one user message per line,
// through server/chat_session.h, so every turn prefills only its new text.
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <csignal>
#include <cstdio>
#include <string>

#include "commands.h"
#include "core/error.h"
#include "line_reader.h"
#include "sampling_flags.h"
#include "server/chat_session.h"

namespace mb::cli {
namespace {

// Set by Ctrl-C during a reply; the reply stops at its next token.
std::atomic<bool> g_interrupted{false};

extern "C" void on_interrupt(int) {
  g_interrupted.store(true);
}

// Ctrl-C stops the reply being written, not the program, while a handler is in place: an
// instance holds it for one reply and puts the previous one back.
class InterruptScope {
 public:
  InterruptScope() {
    g_interrupted.store(false);
    previous_ = std::signal(SIGINT, on_interrupt);
  }
  ~InterruptScope() { std::signal(SIGINT, previous_); }
  InterruptScope(const InterruptScope&) = delete;
  InterruptScope& operator=(const InterruptScope&) = delete;

 private:
  void (*previous_)(int) = SIG_DFL;
};

// The next user message: one line, or several when each but the last ends with a backslash (as
// llama.cpp's conversation mode reads them). False at the end of the input.
bool read_message(LineReader& reader, std::string& message) {
  message.clear();
  std::string line;
  for (const char* prompt = "> "; reader.read_line(prompt, line); prompt = "... ") {
    reader.remember(line);
    if (!line.empty() && line.back() == '\\') {
      line.pop_back();
      message += line + "\n";
      continue;
    }
    message += line;
    return true;
  }
  return !message.empty();
}

// The chat's own commands, as /help lists them.
constexpr const char* kCommandHelp =
    "/help          this list\n"
    "/clear         start the conversation over (the system message stays)\n"
    "/exit, /quit   end the chat (so does Ctrl-D)\n"
    "//text         send \"/text\" as a message\n"
    "Ctrl-C stops a reply, or the prompt's prefill before it.\n";

// A message that looks like a command (a slash, then letters, digits, '-' or '_' up to the first
// space) but names none: refused with the list rather than sent to the model. A path such as
// "/usr/bin is..." is text.
bool looks_like_command(const std::string& message) {
  if (message.size() < 2 || message[0] != '/') return false;
  const size_t end = std::min(message.find_first_of(" \t\n"), message.size());
  for (size_t i = 1; i < end; ++i) {
    const char c = message[i];
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_') return false;
  }
  return true;
}

void print_stats(int turn, const server::ChatTurn& t) {
  std::fprintf(stderr,
               "[turn %d: prompt %lld tokens, %lld resumed from the cache, %lld prefilled; %lld generated "
               "(stop: %s); %.2f s]\n",
               turn, static_cast<long long>(t.prompt_tokens), static_cast<long long>(t.cached_tokens),
               static_cast<long long>(t.prompt_tokens - t.cached_tokens),
               static_cast<long long>(t.completion_tokens), stop_reason_name(t.stop_reason), t.seconds);
}

}  // namespace

void add_chat(CLI::App& app) {
  struct Args {
    std::string model, dtype, system, template_kwargs, device = "cpu";
    int n = 512, threads = 0;
    int64_t context = 0;
    bool stats = false;
    SamplingFlags sampling;
  };
  auto args = std::make_shared<Args>();
  CLI::App* cmd = app.add_subcommand(
      "chat", "Chat with a model from the terminal: one message per line, each turn resuming the last");
  cmd->add_option("-m,--model", args->model,
                  "Checkpoint folder or .gguf file (default: a tiny demo model made on first use)");
  cmd->add_option("--system", args->system, "System message that starts the conversation");
  cmd->add_option("-n,--n-predict", args->n, "Most tokens per reply")->capture_default_str();
  cmd->add_option("-c,--ctx-size", args->context, "Tokens a turn may hold, prompt and reply (0 = no limit)")
      ->capture_default_str();
  cmd->add_option("-t,--threads", args->threads, "Threads (0 = all cores)");
  add_device_option(cmd, args->device);
  cmd->add_option("--dtype", args->dtype,
                  "Weight storage: f32 | bf16 | f16 | q8_0 | q4_0 | q4_k | q6_k (default: as stored)");
  cmd->add_option("--chat-template-kwargs", args->template_kwargs,
                  "Template variables as a JSON object, e.g. '{\"enable_thinking\": false}'");
  add_jinja_flag(cmd);
  cmd->add_flag("--stats", args->stats, "After each reply, print its token counts and time on stderr");
  add_sampling_flags(*cmd, args->sampling, /*state_flags=*/false);
  cmd->callback([args] {
    check_flag_range("-n/--n-predict", args->n, 0, INT32_MAX);
    check_flag_range("-c/--ctx-size", args->context, 0, INT64_MAX, "0 = no limit");
    server::ChatSessionOptions options;
    options.system = args->system;
    options.max_tokens = args->n;
    options.max_context = args->context;
    options.sampling = resolve_sampling(args->sampling);
    options.stop = args->sampling.stops;
    options.stop_at_eos = !args->sampling.ignore_eos;
    options.template_kwargs = args->template_kwargs;
    const auto ctx = make_context(args->threads);
    const std::string model_dir = model_or_demo(args->model);
    const auto model = load_model(model_dir, args->dtype, args->device);
    const Tokenizer tokenizer = load_tokenizer(model_dir);
    const server::ServedChatTemplate chat = server::load_served_chat_template(model_dir);
    std::fprintf(stderr, "%s\n", server::describe_chat_template(chat).c_str());
    if (chat.is_plain()) std::fprintf(stderr, "%s\n", server::plain_format_warning(chat, model_dir).c_str());
    server::ChatSession session(*model, tokenizer, chat, ctx, options);
    const bool terminal = isatty(STDIN_FILENO) != 0;
    LineReader reader(terminal);
    if (terminal)
      std::fprintf(stderr, "chatting with %s (seed %llu): /help lists the commands, Ctrl-C stops a reply\n",
                   model_dir.c_str(), static_cast<unsigned long long>(options.sampling.seed));
    std::string message;
    int failed = 0;
    for (int turn = 1; read_message(reader, message);) {
      if (message == "/exit" || message == "/quit") break;
      if (message == "/clear") {
        session.clear();
        continue;
      }
      if (message == "/help") {
        std::fputs(kCommandHelp, stderr);
        continue;
      }
      if (looks_like_command(message)) {
        const std::string name = message.substr(0, message.find_first_of(" \t\n"));
        std::fprintf(stderr, "unknown command '%s' (not sent to the model); the commands are:\n%s",
                     name.c_str(), kCommandHelp);
        continue;
      }
      if (message.rfind("//", 0) == 0) message.erase(0, 1);
      if (message.empty()) continue;
      InterruptScope scope;
      try {
        const server::ChatTurn t = session.reply(
            message,
            [](std::string_view text) {
              std::fwrite(text.data(), 1, text.size(), stdout);
              std::fflush(stdout);
            },
            &g_interrupted);
        if (t.dropped_messages > 0)
          std::fprintf(
              stderr,
              "\nnote: the %zu oldest messages were dropped from the conversation to make room for "
              "this turn (the context size -c, the 2^20 tokens or the %zu messages a turn may hold); "
              "the system message stays\n",
              t.dropped_messages, options.max_messages);
        if (!t.answered) {
          std::fputs("[stopped before the reply began: the message was not added to the conversation]\n",
                     stderr);
          continue;
        }
        std::fputs("\n", stdout);
        std::fflush(stdout);
        if (args->stats) print_stats(turn, t);
        ++turn;
      } catch (const Error& e) {
        // A message the conversation cannot take (the context is full, the template refuses it)
        // is reported and dropped; the conversation goes on without it.
        std::fprintf(stderr, "error: %s\n", e.what());
        ++failed;
      }
    }
    if (failed > 0) throw Error(std::to_string(failed) + " message(s) got no reply (see above)");
  });
}

}  // namespace mb::cli

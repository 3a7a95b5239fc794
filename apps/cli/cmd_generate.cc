// SPDX-License-Identifier: MIT
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <random>

#include "commands.h"
#include "core/error.h"
#include "engine/generate.h"
#include "engine/gguf_tokenizer.h"
#include "engine/state_file.h"
#include "grammar_flags.h"
#include "io/file_io.h"
#include "sampling_flags.h"
#include "server/chat_session.h"

namespace mb::cli {

void add_sampling_flags(CLI::App& cmd, SamplingFlags& f, bool state_flags) {
  cmd.add_option("--temp", f.params.temperature, "Temperature (0 = greedy)")->capture_default_str();
  cmd.add_option("--top-k", f.params.top_k, "Top-k (0 = off)")->capture_default_str();
  cmd.add_option("--top-p", f.params.top_p, "Top-p (1 = off)")->capture_default_str();
  cmd.add_option("--min-p", f.params.min_p, "Min-p (0 = off)")->capture_default_str();
  cmd.add_option("--repeat-penalty", f.params.repeat_penalty, "Repetition penalty (1 = off)")
      ->capture_default_str();
  cmd.add_option("--repeat-last-n", f.params.repeat_last_n, "Tokens the penalty looks back over (-1 = all)")
      ->capture_default_str();
  cmd.add_option("--presence-penalty", f.params.presence_penalty,
                 "Subtract this from the logit of every token already generated (OpenAI's; 0 = off)")
      ->capture_default_str();
  cmd.add_option("--frequency-penalty", f.params.frequency_penalty,
                 "Subtract this times its count from each generated token's logit (0 = off)")
      ->capture_default_str();
  cmd.add_option("--seed", f.seed, "Sampling seed (-1 = random)")->capture_default_str();
  cmd.add_option("--stop", f.stops, "Stop string (repeatable)");
  if (state_flags) {
    cmd.add_option("--state-in", f.state_in, "Continue from a saved state file");
    cmd.add_option("--state-out", f.state_out, "Save the final state to this file");
  }
  cmd.add_flag("--ignore-eos", f.ignore_eos, "Keep generating past end-of-sequence tokens");
}

namespace {

// The flag that sets each sampling parameter, so a bad value is reported as the user typed it.
const char* sampling_flag(SamplingField field) {
  switch (field) {
    case SamplingField::Temperature:
      return "--temp";
    case SamplingField::TopK:
      return "--top-k";
    case SamplingField::TopP:
      return "--top-p";
    case SamplingField::MinP:
      return "--min-p";
    case SamplingField::RepeatPenalty:
      return "--repeat-penalty";
    case SamplingField::RepeatLastN:
      return "--repeat-last-n";
    case SamplingField::PresencePenalty:
      return "--presence-penalty";
    case SamplingField::FrequencyPenalty:
      return "--frequency-penalty";
    case SamplingField::LogitBias:
      return "logit_bias";  // no flag sets it
  }
  return "?";
}

}  // namespace

SamplingParams resolve_sampling(const SamplingFlags& f) {
  SamplingParams params = f.params;
  if (const auto problem = find_sampling_problem(params))
    throw Error(std::string(sampling_flag(problem->field)) + " must be " + problem->requirement + ", got " +
                problem->value);
  check_flag_range("--seed", f.seed, -1, INT64_MAX, "-1 = random");
  if (!f.state_out.empty()) check_writable_output(f.state_out, "--state-out");
  params.seed = f.seed == -1 ? std::random_device{}() : static_cast<uint64_t>(f.seed);
  return params;
}

void add_generate(CLI::App& app) {
  struct Args {
    std::string model, tokens, dtype, device = "cpu";
    int n = 16, threads = 0;
    SamplingFlags sampling;
    GrammarFlags grammar;
  };
  auto args = std::make_shared<Args>();
  args->sampling.params.temperature = 0.0f;  // `generate` is greedy unless asked otherwise
  args->sampling.seed = 0;
  CLI::App* cmd = app.add_subcommand("generate", "Generate token ids from token ids (greedy by default)");
  cmd->add_option("-m,--model", args->model, "Checkpoint folder or .gguf file")->required();
  cmd->add_option("--tokens", args->tokens, "Comma-separated prompt token ids")->required();
  cmd->add_option("-n,--n-predict", args->n, "Tokens to generate")->capture_default_str();
  cmd->add_option("-t,--threads", args->threads, "Threads (0 = all cores)");
  add_device_option(cmd, args->device);
  cmd->add_option("--dtype", args->dtype,
                  "Weight storage: f32 | bf16 | f16 | q8_0 | q4_0 | q4_k | q6_k (default: as stored)");
  add_sampling_flags(*cmd, args->sampling);
  add_grammar_flags(*cmd, args->grammar);
  cmd->callback([args] {
    GenerateRequest request;
    check_flag_range("-n/--n-predict", args->n, 0, INT64_MAX);
    request.prompt = parse_token_list(args->tokens);
    request.max_new_tokens = args->n;
    request.sampling = resolve_sampling(args->sampling);
    request.stop_at_eos = !args->sampling.ignore_eos;
    const auto ctx = make_context(args->threads);
    auto model = load_model(args->model, args->dtype, args->device);
    // The checkpoint's tokenizer, when it has one, is used as `run` and `serve` use it: it bounds
    // the ids a prompt may hold and the sampler may produce and adds its end-of-text ids, so the
    // same ids get the same answer from all three.
    const std::optional<Tokenizer> tokenizer = find_tokenizer(args->model);
    request.stop_strings = args->sampling.stops;
    request.constraint = resolve_grammar(args->grammar, tokenizer ? &*tokenizer : nullptr);
    SequenceState state =
        args->sampling.state_in.empty() ? model->new_state() : load_state(args->sampling.state_in, *model);
    Generator generator(*model, tokenizer ? &*tokenizer : nullptr, ctx);
    const GenerateResult result = generator.generate(request, state);
    std::printf("%s\n", join_ids(result.tokens).c_str());
    if (!args->sampling.state_out.empty()) save_state(args->sampling.state_out, *model, state);
  });
}

namespace {

// `run --chat`: one turn of a chat session, so the prompt is rendered as `chat` and `serve`
// render a user message, and the reply is streamed without the prompt in front of it.
void run_chat_prompt(const Model& model, const Tokenizer& tokenizer, const std::string& model_dir,
                     const std::string& text, int max_tokens, int64_t context, const SamplingParams& sampling,
                     const SamplingFlags& flags, const ComputeContext& ctx) {
  const server::ServedChatTemplate chat = server::load_served_chat_template(model_dir);
  std::fprintf(stderr, "%s\n", server::describe_chat_template(chat).c_str());
  if (chat.is_plain()) std::fprintf(stderr, "%s\n", server::plain_format_warning(chat, model_dir).c_str());
  server::ChatSessionOptions options;
  options.max_tokens = max_tokens;
  options.max_context = context;
  options.sampling = sampling;
  options.stop = flags.stops;
  options.stop_at_eos = !flags.ignore_eos;
  server::ChatSession session(model, tokenizer, chat, ctx, options);
  const server::ChatTurn turn = session.reply(text, [](std::string_view piece) {
    std::fwrite(piece.data(), 1, piece.size(), stdout);
    std::fflush(stdout);
  });
  std::fputs("\n", stdout);
  std::fprintf(stderr, "\nprompt tokens: %lld (rendered), %lld generated (stop: %s, seed %llu), %.2f s\n",
               static_cast<long long>(turn.prompt_tokens), static_cast<long long>(turn.completion_tokens),
               stop_reason_name(turn.stop_reason), static_cast<unsigned long long>(sampling.seed),
               turn.seconds);
}

}  // namespace

void add_run(CLI::App& app) {
  struct Args {
    std::string model, prompt, prompt_file, dtype, device = "cpu";
    int n = 128, threads = 0;
    int64_t context = 0;
    bool chat = false;
    SamplingFlags sampling;
    GrammarFlags grammar;
  };
  auto args = std::make_shared<Args>();
  CLI::App* cmd = app.add_subcommand("run", "Generate text from a prompt, streamed to stdout");
  cmd->add_option("-m,--model", args->model,
                  "Checkpoint folder or .gguf file (default: a tiny demo model made on first use)");
  auto* prompt = cmd->add_option("-p,--prompt", args->prompt, "Prompt text");
  auto* prompt_file =
      cmd->add_option("-f,--file,--prompt-file", args->prompt_file, "Read the prompt from a file");
  prompt->excludes(prompt_file);
  cmd->add_option("-n,--n-predict", args->n, "Maximum tokens to generate")->capture_default_str();
  cmd->add_option("-t,--threads", args->threads, "Threads (0 = all cores)");
  add_device_option(cmd, args->device);
  cmd->add_option("--dtype", args->dtype,
                  "Weight storage: f32 | bf16 | f16 | q8_0 | q4_0 | q4_k | q6_k (default: as stored)");
  cmd->add_option("-c,--ctx-size", args->context,
                  "Tokens the run may hold, prompt and generated (0 = no limit; -n is cut to the room left)")
      ->capture_default_str();
  add_jinja_flag(cmd);
  cmd->add_flag("--chat", args->chat,
                "Send the prompt as one user message through the model's chat template and print the reply");
  add_sampling_flags(*cmd, args->sampling);
  add_grammar_flags(*cmd, args->grammar);
  cmd->callback([args] {
    check_flag_range("-n/--n-predict", args->n, 0, INT64_MAX);
    check_flag_range("-c/--ctx-size", args->context, 0, INT64_MAX, "0 = no limit");
    if (args->chat && !(args->grammar.text.empty() && args->grammar.file.empty()))
      throw Error(
          "--grammar and --grammar-file do not apply to --chat (use `mambacpp serve`'s \"grammar\" field)");
    if (args->chat && !(args->sampling.state_in.empty() && args->sampling.state_out.empty()))
      throw Error("--state-in and --state-out do not apply to --chat (`mambacpp chat` holds a conversation)");
    const SamplingParams sampling = resolve_sampling(args->sampling);
    const auto ctx = make_context(args->threads);
    const std::string model_dir = model_or_demo(args->model);
    std::string text = args->prompt;
    if (!args->prompt_file.empty())
      text = read_file_limited(args->prompt_file, kMaxPromptFileBytes, "prompt file");
    if (text.empty()) throw Error("give a prompt with -p/--prompt TEXT or -f/--file FILE");
    auto model = load_model(model_dir, args->dtype, args->device);
    const Tokenizer tokenizer = load_tokenizer(model_dir);
    if (args->chat) {
      run_chat_prompt(*model, tokenizer, model_dir, text, args->n, args->context, sampling, args->sampling,
                      ctx);
      return;
    }
    GenerateRequest request;
    request.prompt = tokenizer.encode(text);
    if (request.prompt.empty()) throw Error("the prompt encodes to no tokens");
    request.max_new_tokens = args->n;
    if (args->context > 0) {
      // As llama-cli's -c: the prompt and what is generated share the context.
      const int64_t prompt_tokens = static_cast<int64_t>(request.prompt.size());
      if (prompt_tokens >= args->context)
        throw Error("the prompt has " + std::to_string(prompt_tokens) +
                    " tokens, and the context size (-c) is " + std::to_string(args->context) +
                    ": no room is left to generate");
      request.max_new_tokens = std::min<int64_t>(request.max_new_tokens, args->context - prompt_tokens);
    }
    request.sampling = sampling;
    request.stop_strings = args->sampling.stops;
    request.stop_at_eos = !args->sampling.ignore_eos;
    request.constraint = resolve_grammar(args->grammar, &tokenizer);
    SequenceState state =
        args->sampling.state_in.empty() ? model->new_state() : load_state(args->sampling.state_in, *model);
    Generator generator(*model, &tokenizer, ctx);
    std::fputs(text.c_str(), stdout);
    const GenerateResult result = generator.generate(request, state, [](const StreamEvent& event) {
      std::fwrite(event.text.data(), 1, event.text.size(), stdout);
      std::fflush(stdout);
      return true;
    });
    std::fputs("\n", stdout);
    if (!args->sampling.state_out.empty()) save_state(args->sampling.state_out, *model, state);
    std::fprintf(
        stderr,
        "\nprompt tokens: %lld, prefill: %.1f tok/s, decode: %.1f tok/s (%zu tokens, stop: %s, seed %llu)\n",
        static_cast<long long>(result.prompt_tokens), result.prompt_tokens / result.prefill_seconds,
        result.tokens.size() / std::max(result.decode_seconds, 1e-9), result.tokens.size(),
        stop_reason_name(result.stop_reason), static_cast<unsigned long long>(request.sampling.seed));
  });
}

}  // namespace mb::cli

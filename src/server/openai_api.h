// SPDX-License-Identifier: MIT
// The OpenAI-compatible HTTP API as pure functions: request bodies are parsed and validated into
// a ServeRequest, and the scheduler's events are formatted as response bodies or server-sent
// events. Nothing here touches a socket, so every rule is unit-tested directly.
//
// Requests follow OpenAI's /v1/completions and /v1/chat/completions, plus llama.cpp's sampling
// fields (top_k, min_p, repeat_penalty, repeat_last_n, n_probs) and chat_template_kwargs; a chat
// request's messages, tools and template keyword arguments reach the chat template as given
// (server/chat_request.h). Fields this server does not know
// are ignored, as OpenAI does (clients send vendor extensions freely); known fields are checked
// for type and range, and a request this server cannot honour exactly (echo, best_of > 1, audio,
// suffix, ...: server/request_surface.h) is refused rather than answered differently from what
// was asked.
#pragma once

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "chat/chat_template.h"
#include "core/error.h"
#include "engine/grammar/grammar_constraint.h"
#include "engine/scheduler.h"
#include "server/chat_request.h"
#include "server/chat_tools.h"
#include "tokenizer/tokenizer.h"

namespace mb::server {

// An error reported to the client as {"error": {"message", "type", "code"}} with this HTTP status.
class ApiError : public Error {
 public:
  ApiError(int status, std::string type, const std::string& message, std::string code = "")
      : Error(message), status(status), type(std::move(type)), code(std::move(code)) {}
  int status;
  std::string type;  // "invalid_request_error", "authentication_error", ...
  std::string code;  // "" is sent as null
};

// 400 invalid_request_error naming the problem.
ApiError invalid_request(const std::string& message, const std::string& code = "");

// The error body in OpenAI's shape, as an object and as text.
nlohmann::json error_object(const std::string& message, const std::string& type,
                            const std::string& code = "");
std::string error_json(const std::string& message, const std::string& type, const std::string& code = "");
// The conventional error type of an HTTP status ("invalid_request_error" for 400, ...).
const char* error_type_for_status(int status);

// Parses a request body in time linear in its size; malformed JSON, nesting past 64 levels, more
// than 131,072 arrays and objects and non-object bodies are a 400.
nlohmann::json parse_request_body(std::string_view body);

enum class ApiKind { Completion, Chat };

// Defaults and limits of the server that apply to every request.
struct ApiDefaults {
  int64_t max_context = 0;                    // -c; 0 = no limit
  int64_t vocab_size = 0;                     // the model's; prompt ids must lie below it (0 = unchecked)
  int completion_max_tokens = 16;             // OpenAI's default for /v1/completions
  int chat_max_tokens_without_context = 512;  // chat without max_tokens and without -c
  size_t max_prompt_tokens_in_request = 1u
                                        << 20;  // prompts (ids or encoded text) longer than this are refused
  size_t max_stop_strings = 16;
  size_t max_messages = 4096;
  ReasoningSettings reasoning;  // --reasoning-format, --reasoning-budget (server/chat_tools.h)
};

// A parsed request: the prompt still as given (text, token ids or messages), the rest ready for
// the scheduler.
struct ApiRequest {
  ApiKind kind = ApiKind::Completion;
  std::string model;                       // echoed back; any value is accepted (the server serves one model)
  std::optional<std::string> prompt_text;  // completions with a string prompt
  std::vector<int32_t> prompt_ids;         // completions with a token-id prompt
  ChatVariables chat;                      // chat: what the template is given
  ServeRequest serve;                      // everything but serve.prompt
  bool max_tokens_given = false;
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage: a last chunk with usage only
  bool logprobs = false;       // report the chosen tokens' log-probabilities
  int top_logprobs = 0;        // alternatives reported with each token (serve.n_probs)
  ChatReplyOptions reply;      // chat: tools, tool_choice, reasoning (server/chat_tools.h)
  // GBNF text constraining the output ("grammar", as llama-server takes it; other fields that
  // constrain, like response_format, write theirs here too). compile_request_constraint
  // (server/request_constraint.h) turns it into serve.constraint; an empty string is none.
  std::optional<std::string> grammar;
};

// A served checkpoint's chat template: its own (find_chat_template), else the documented plain
// format. `error` says why its own cannot be parsed: chat requests then get a 400 naming it, while
// completions keep working. `reading` is how the template reads list contents and tool-call
// arguments (probe_template), which decides the form they are given in.
struct ServedChatTemplate {
  ChatTemplate chat_template = ChatTemplate::plain();
  ChatRenderOptions render_options;
  std::string error;
  TemplateReading reading;
  // Where the checkpoint's template was read (ModelChatTemplate::origin); empty for the plain
  // format. `hash` is 16 hex digits of the FNV-1a hash of its source text, so two checkpoints'
  // templates can be told apart at a glance; `named` the names of its other named templates.
  std::string origin;
  std::string hash;
  std::vector<std::string> named;
  ChatFormat format;  // its tool-call format and thinking markers (detect_chat_format)
  bool is_plain() const { return origin.empty(); }
};
// The template of a checkpoint folder or GGUF file (find_checkpoint_chat_template).
ServedChatTemplate load_served_chat_template(const std::string& model_path);
// One line for the user saying which template a chat uses: "chat template: ORIGIN (hash H)", or
// that it is the built-in plain format.
std::string describe_chat_template(const ServedChatTemplate& chat);
// The warning a chat in the plain format deserves (the model was surely trained on another
// format), naming `model_path`; empty when the checkpoint has its own template.
std::string plain_format_warning(const ServedChatTemplate& chat, const std::string& model_path);

// Parses (parse_request_body) and validates a body of the given kind. `seed_if_absent` is used
// when the request has no seed (the server draws it). Throws ApiError (400) naming the field and
// the problem.
ApiRequest parse_api_request(ApiKind kind, std::string_view body, const ApiDefaults& defaults,
                             uint64_t seed_if_absent);

// Renders and tokenizes the prompt into request.serve.prompt and settles max_tokens against the
// context: an empty prompt, ids outside the vocabulary or a prompt that leaves no room under -c
// are a 400, a template that cannot render the messages is a 400 naming the template's problem,
// and max_tokens is cut to the room left under -c. Chat requests are rendered with `chat` and the
// generation prompt, through ChatTemplate::render_json.
void resolve_prompt(ApiRequest& request, const Tokenizer& tokenizer, const ServedChatTemplate& chat,
                    const ApiDefaults& defaults);

// What every generation request goes through before it is queued, for the server and the Python
// package alike: the chat template's error (a 400 chat_template_error for chat requests), then
// parse_request_body, parse_api_request and resolve_prompt; `model_id` is reported when the
// request names no model. Throws ApiError (400) as those do.
// `trie` (may be null) is the caller's TokenTrie of `tokenizer`, which compiles a grammar
// (compile_request_constraint builds one per request without it).
ApiRequest prepare_api_request(ApiKind kind, std::string_view body, const Tokenizer& tokenizer,
                               const ServedChatTemplate& chat, const ApiDefaults& defaults,
                               uint64_t seed_if_absent, const std::string& model_id,
                               const std::shared_ptr<const TokenTrie>& trie = nullptr);

// A response's id: "cmpl-" (completions) or "chatcmpl-" (chat) and 16 hex digits of `random`.
std::string response_id(ApiKind kind, uint64_t random);

// The OpenAI finish_reason of a stop reason: "length" when max_tokens ran out, else "stop".
const char* finish_reason(StopReason reason);

// Formats the events of one request, as one JSON response or as server-sent events. Feed every
// event in order; the object keeps the text and log-probabilities a final response needs.
class ResponseFormatter {
 public:
  // `tokenizer` spells the tokens of log-probability entries. `id` is the response id
  // ("cmpl-..." or "chatcmpl-..."), `created` the Unix time.
  ResponseFormatter(const ApiRequest& request, const Tokenizer& tokenizer, std::string id, int64_t created);

  // Streaming: the SSE text to send before any event (the chat role chunk; empty for
  // completions), then for each event. A Done event's text ends with the final chunk, the usage
  // chunk when asked for, and "data: [DONE]"; an Error event's is an error object and [DONE].
  std::string stream_prelude() const;
  std::string stream_event(const ServeEvent& event);
  // The same as JSON objects, without the SSE framing and the final [DONE] (for clients that
  // take the chunks themselves, such as the Python package): the prelude chunk, if any, and each
  // event's chunks in order; an Error event yields the error object.
  std::optional<nlohmann::json> prelude_chunk() const;
  std::vector<nlohmann::json> stream_chunks(const ServeEvent& event);

  // Non-streaming: collect every event, then take the response body. A request that ended with
  // an Error event throws ApiError (500) instead.
  void collect(const ServeEvent& event);
  nlohmann::json response() const;

  bool finished() const { return finished_; }
  // The index its choices carry (n > 1: server/request_surface.h's ChoicesFormatter); 0 by default.
  void set_choice_index(int index) { index_ = index; }

 private:
  nlohmann::json logprob_entry(const ServeEvent& event) const;  // one token, in the kind's format
  nlohmann::json usage_json() const;
  nlohmann::json chunk(nlohmann::json choice) const;
  void add_logprobs(const ServeEvent& event, nlohmann::json& into) const;
  nlohmann::json empty_logprobs() const;
  std::vector<nlohmann::json> reply_chunks(const ServeEvent& event);  // chat with reply_parser_

  ApiKind kind_;
  std::string model_;
  bool logprobs_;
  int top_logprobs_;
  bool include_usage_;
  const Tokenizer& tokenizer_;
  std::string id_;
  int64_t created_;
  int index_ = 0;

  std::string text_;
  nlohmann::json logprobs_json_;
  size_t text_offset_ = 0;
  bool finished_ = false;
  std::string error_;
  // Chat replies with tool calls or reasoning to split (make_reply_parser); else text_ is the content.
  std::optional<ChatOutputParser> reply_parser_;
  StopReason stop_reason_ = StopReason::MaxTokens;
  int64_t prompt_tokens_ = 0, cached_tokens_ = 0, completion_tokens_ = 0;
};

// One server-sent event carrying `data`.
std::string sse_data(const std::string& data);

// /tokenize {"content": string} -> the ids; /detokenize {"tokens": [ids]} -> the text. Throw
// ApiError (400) for a missing or mistyped field or an id outside the vocabulary.
nlohmann::json tokenize_response(const nlohmann::json& body, const Tokenizer& tokenizer);
nlohmann::json detokenize_response(const nlohmann::json& body, const Tokenizer& tokenizer);

// GET /v1/models for the one model this server holds.
nlohmann::json models_response(const std::string& model_id, int64_t created, int64_t max_context);

// The Prometheus text exposition of the scheduler's metrics and the server's request counters.
struct HttpCounters {
  uint64_t requests_total = 0, requests_rejected = 0, requests_unauthorized = 0, queue_full = 0,
           client_disconnects = 0;
};
std::string prometheus_metrics(const SchedulerMetrics& metrics, const HttpCounters& counters);

}  // namespace mb::server

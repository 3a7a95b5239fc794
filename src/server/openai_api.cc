// SPDX-License-Identifier: MIT
#include "server/openai_api.h"
#include "server/request_constraint.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdio>

#include "core/json_text.h"
#include "engine/gguf_chat_template.h"
#include "io/binary_codec.h"
#include "server/request_surface.h"

namespace mb::server {

using nlohmann::json;

ApiError invalid_request(const std::string& message, const std::string& code) {
  return ApiError(400, "invalid_request_error", message, code);
}

json error_object(const std::string& message, const std::string& type, const std::string& code) {
  json error = {{"message", message}, {"type", type}, {"code", code.empty() ? json(nullptr) : json(code)}};
  return json{{"error", error}};
}

std::string error_json(const std::string& message, const std::string& type, const std::string& code) {
  // A message may quote bytes a client sent; replacing invalid UTF-8 keeps the body valid JSON.
  return error_object(message, type, code).dump(-1, ' ', false, json::error_handler_t::replace);
}

const char* error_type_for_status(int status) {
  switch (status) {
    case 400:
    case 404:
    case 405:
    case 413:
      return "invalid_request_error";
    case 401:
      return "authentication_error";
    case 503:
      return "unavailable_error";
    default:
      return status >= 500 ? "server_error" : "invalid_request_error";
  }
}

json parse_request_body(std::string_view body) {
  // A chat request of 4,096 messages in content parts needs a few tens of thousands of arrays
  // and objects; the limit keeps an 8 MB body of a million empty objects (some 200 MB parsed)
  // from costing more than about 25 MB before it is refused.
  constexpr size_t kMaxContainers = size_t{1} << 17;
  json value;
  try {
    value = parse_json_text(body, "the request body", 64, nullptr, kMaxContainers);
  } catch (const Error& e) {
    throw invalid_request(e.what(), "invalid_json");
  }
  if (!value.is_object())
    throw invalid_request("the request body must be a JSON object, got " + json_excerpt(value));
  return value;
}

namespace {

// The field's value, or null when absent: OpenAI treats an explicit null as "not given".
const json* field(const json& body, const char* name) {
  const auto it = body.find(name);
  if (it == body.end() || it->is_null()) return nullptr;
  return &*it;
}

ApiError wrong_type(const char* name, const char* expected, const json& value) {
  return invalid_request(std::string(name) + " must be " + expected + ", got " + json_excerpt(value));
}

std::optional<double> number_field(const json& body, const char* name) {
  const json* value = field(body, name);
  if (!value) return std::nullopt;
  if (!value->is_number()) throw wrong_type(name, "a number", *value);
  return value->get<double>();
}

// An integer in [min, max]; an integral float such as 16.0 counts as the integer.
std::optional<int64_t> integer_field(const json& body, const char* name, int64_t min, int64_t max) {
  const json* value = field(body, name);
  if (!value) return std::nullopt;
  int64_t result = 0;
  if (value->is_number_unsigned()) {
    const uint64_t u = value->get<uint64_t>();
    result = u > static_cast<uint64_t>(INT64_MAX) ? INT64_MAX : static_cast<int64_t>(u);
  } else if (value->is_number_integer()) {
    result = value->get<int64_t>();
  } else if (value->is_number_float()) {
    const double d = value->get<double>();
    if (d != std::floor(d) || d < -9.2e18 || d > 9.2e18) throw wrong_type(name, "an integer", *value);
    result = static_cast<int64_t>(d);
  } else {
    throw wrong_type(name, "an integer", *value);
  }
  if (result < min || result > max) {
    const std::string range = max == INT64_MAX
                                  ? ">= " + std::to_string(min)
                                  : "in [" + std::to_string(min) + ", " + std::to_string(max) + "]";
    throw invalid_request(std::string(name) + " must be " + range + ", got " + json_excerpt(*value));
  }
  return result;
}

std::optional<bool> bool_field(const json& body, const char* name) {
  const json* value = field(body, name);
  if (!value) return std::nullopt;
  if (!value->is_boolean()) throw wrong_type(name, "true or false", *value);
  return value->get<bool>();
}

void read_sampling(const json& body, SamplingParams& sampling, uint64_t seed_if_absent) {
  if (auto v = number_field(body, "temperature")) sampling.temperature = static_cast<float>(*v);
  if (auto v = integer_field(body, "top_k", INT_MIN, INT_MAX)) sampling.top_k = static_cast<int>(*v);
  if (auto v = number_field(body, "top_p")) sampling.top_p = static_cast<float>(*v);
  if (auto v = number_field(body, "min_p")) sampling.min_p = static_cast<float>(*v);
  if (auto v = number_field(body, "repeat_penalty")) sampling.repeat_penalty = static_cast<float>(*v);
  if (auto v = integer_field(body, "repeat_last_n", INT_MIN, INT_MAX))
    sampling.repeat_last_n = static_cast<int>(*v);
  if (const auto problem = find_sampling_problem(sampling))
    throw invalid_request(std::string(sampling_field_name(problem->field)) + " must be " +
                          problem->requirement + ", got " + problem->value);
  // llama.cpp's -1 asks for a random seed, like an absent one.
  sampling.seed = seed_if_absent;
  if (const json* seed = field(body, "seed")) {
    if (seed->is_number_unsigned()) {
      sampling.seed = seed->get<uint64_t>();
    } else if (seed->is_number_integer() && seed->get<int64_t>() == -1) {
      sampling.seed = seed_if_absent;
    } else {
      throw invalid_request("seed must be an integer in [0, 2^64) or -1 (random), got " +
                            json_excerpt(*seed));
    }
  }
}

void read_stop(const json& body, std::vector<std::string>& stops, size_t max_stops) {
  const json* value = field(body, "stop");
  if (!value) return;
  const auto add = [&](const json& item) {
    if (!item.is_string()) throw wrong_type("stop", "a string or a list of strings", *value);
    const std::string& text = item.get_ref<const std::string&>();
    if (text.empty()) throw invalid_request("stop strings must not be empty");
    stops.push_back(text);
  };
  if (value->is_array()) {
    if (value->size() > max_stops)
      throw invalid_request("stop takes at most " + std::to_string(max_stops) + " strings, got " +
                            std::to_string(value->size()));
    for (const json& item : *value) add(item);
  } else {
    add(*value);
  }
}

std::vector<int32_t> read_token_ids(const json& array, const char* name, size_t max_count) {
  if (array.size() > max_count)
    throw invalid_request(std::string(name) + " has " + std::to_string(array.size()) +
                          " tokens, more than the " + std::to_string(max_count) + " a request may carry");
  std::vector<int32_t> ids;
  ids.reserve(array.size());
  for (const json& item : array) {
    if (!item.is_number_integer() || item.get<int64_t>() < INT32_MIN || item.get<int64_t>() > INT32_MAX)
      throw invalid_request(std::string(name) + " must be a string or a list of token ids, got the item " +
                            json_excerpt(item));
    ids.push_back(static_cast<int32_t>(item.get<int64_t>()));
  }
  return ids;
}

void read_completion_prompt(const json& body, ApiRequest& request, const ApiDefaults& defaults) {
  const json* prompt = field(body, "prompt");
  if (!prompt) throw invalid_request("prompt is required");
  // OpenAI also takes a list of prompts; a list of one is unwrapped, more are refused.
  const json* single = prompt;
  if (prompt->is_array() && prompt->size() == 1 && ((*prompt)[0].is_string() || (*prompt)[0].is_array()))
    single = &(*prompt)[0];
  if (single->is_string()) {
    request.prompt_text = single->get<std::string>();
  } else if (single->is_array()) {
    for (const json& item : *single)
      if (item.is_string() || item.is_array())
        throw invalid_request("only one prompt per request is supported");
    request.prompt_ids = read_token_ids(*single, "prompt", defaults.max_prompt_tokens_in_request);
  } else {
    throw wrong_type("prompt", "a string or a list of token ids", *prompt);
  }
}

void read_logprobs(ApiKind kind, const json& body, ApiRequest& request) {
  if (kind == ApiKind::Completion) {
    if (auto n = integer_field(body, "logprobs", 0, kMaxProbs)) {
      request.logprobs = true;
      request.top_logprobs = static_cast<int>(*n);
    }
  } else {
    request.logprobs = bool_field(body, "logprobs").value_or(false);
    if (auto n = integer_field(body, "top_logprobs", 0, kMaxProbs)) {
      if (!request.logprobs && *n > 0) throw invalid_request("top_logprobs requires logprobs: true");
      request.top_logprobs = static_cast<int>(*n);
    }
  }
  // llama.cpp's n_probs: the most likely candidates with each token, reported as logprobs.
  if (auto n = integer_field(body, "n_probs", 0, kMaxProbs); n && *n > 0) {
    request.logprobs = true;
    request.top_logprobs = std::max(request.top_logprobs, static_cast<int>(*n));
  }
  request.serve.n_probs = request.top_logprobs;
  request.serve.logprobs = request.logprobs;
  // OpenAI reports the model's own distribution (the softmax of the raw logits); llama.cpp's
  // post_sampling_probs asks for the distribution the token was drawn from instead.
  request.serve.post_sampling_probs = bool_field(body, "post_sampling_probs").value_or(false);
}

}  // namespace

ApiRequest parse_api_request(ApiKind kind, std::string_view body_text, const ApiDefaults& defaults,
                             uint64_t seed_if_absent) {
  const json body = parse_request_body(body_text);
  ApiRequest request;
  request.kind = kind;
  if (const json* model = field(body, "model")) {
    if (!model->is_string()) throw wrong_type("model", "a string", *model);
    request.model = model->get<std::string>();
  }
  if (kind == ApiKind::Completion)
    read_completion_prompt(body, request, defaults);
  else
    request.chat = read_chat_variables(body_text, body, defaults.max_messages);
  if (kind == ApiKind::Chat) read_chat_reply_options(body, request.reply);
  refuse_unsupported_fields(body, kind);
  read_sampling(body, request.serve.sampling, seed_if_absent);
  read_penalties_and_bias(body, request.serve.sampling);
  request.serve.n = read_choice_count(body);
  read_stop(body, request.serve.stop, defaults.max_stop_strings);
  // max_completion_tokens is the newer name of max_tokens (request_surface.h).
  if (const std::optional<int> max_tokens = read_max_tokens(body)) {
    request.serve.max_tokens = *max_tokens;
    request.max_tokens_given = true;
  }
  if (auto ignore_eos = bool_field(body, "ignore_eos")) request.serve.stop_at_eos = !*ignore_eos;
  request.stream = bool_field(body, "stream").value_or(false);
  read_stream_options(body, request.include_usage);
  read_logprobs(kind, body, request);
  if (const json* grammar = field(body, "grammar")) {
    if (!grammar->is_string()) throw wrong_type("grammar", "a string (GBNF)", *grammar);
    if (!grammar->get_ref<const std::string&>().empty()) request.grammar = grammar->get<std::string>();
  }
  return request;
}

void resolve_prompt(ApiRequest& request, const Tokenizer& tokenizer, const ServedChatTemplate& chat,
                    const ApiDefaults& defaults) {
  std::vector<int32_t>& prompt = request.serve.prompt;
  if (request.kind == ApiKind::Chat) {
    ChatRenderOptions options = chat.render_options;
    options.add_generation_prompt = true;
    std::string text;
    try {
      text = chat.chat_template.render_json(request.chat.to_json(chat.reading), options);
    } catch (const Error& e) {
      throw invalid_request(
          std::string("the model's chat template cannot render these messages: ") + e.what(),
          "chat_template_error");
    }
    prompt = tokenizer.encode(text);
    settle_chat_reply(request.reply, chat.format, text, defaults.reasoning, request.grammar);
  } else if (request.prompt_text) {
    prompt = tokenizer.encode(*request.prompt_text);
  } else {
    prompt = request.prompt_ids;
  }
  if (prompt.empty()) throw invalid_request("the prompt is empty (it encodes to no tokens)", "empty_prompt");
  check_logit_bias_vocabulary(request.serve.sampling, tokenizer, defaults.vocab_size);
  // Without -c nothing else bounds the prefill a text prompt asks for before it is queued.
  if (prompt.size() > defaults.max_prompt_tokens_in_request)
    throw invalid_request("the prompt has " + std::to_string(prompt.size()) + " tokens, more than the " +
                              std::to_string(defaults.max_prompt_tokens_in_request) + " a request may carry",
                          "context_length_exceeded");
  if (defaults.vocab_size > 0)
    for (int32_t id : prompt)
      if (id < 0 || id >= defaults.vocab_size)
        throw invalid_request("prompt token id " + std::to_string(id) + " is outside the vocabulary [0, " +
                              std::to_string(defaults.vocab_size) + ")");
  const int64_t length = static_cast<int64_t>(prompt.size());
  if (defaults.max_context > 0 && length >= defaults.max_context)
    throw invalid_request("the prompt has " + std::to_string(length) +
                              " tokens, and the context size (-c) is " +
                              std::to_string(defaults.max_context) + ": no room is left to generate",
                          "context_length_exceeded");
  const int64_t room = defaults.max_context > 0 ? defaults.max_context - length : INT_MAX;
  if (!request.max_tokens_given)
    request.serve.max_tokens = request.kind == ApiKind::Completion ? defaults.completion_max_tokens
                               : defaults.max_context > 0 ? static_cast<int>(std::min<int64_t>(room, INT_MAX))
                                                          : defaults.chat_max_tokens_without_context;
  request.serve.max_tokens = static_cast<int>(std::min<int64_t>(request.serve.max_tokens, room));
}

ServedChatTemplate load_served_chat_template(const std::string& model_path) {
  ServedChatTemplate served;
  if (const auto found = find_checkpoint_chat_template(model_path)) {
    served.render_options = found->options;
    served.origin = found->origin;
    served.format = detect_chat_format(found->source);
    const uint64_t hash =
        binary::fnv1a64(reinterpret_cast<const uint8_t*>(found->source.data()), found->source.size());
    char hex[17];
    std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(hash));
    served.hash = hex;
    for (const auto& named : found->named) served.named.push_back(named.first);
    try {
      served.chat_template = ChatTemplate::parse(found->source);
    } catch (const Error& e) {
      served.error = e.what();
    }
  }
  if (served.error.empty()) served.reading = probe_template(served.chat_template, served.render_options);
  return served;
}

std::string describe_chat_template(const ServedChatTemplate& chat) {
  if (chat.is_plain())
    return "chat template: the built-in plain format (\"role: content\" lines; the model has none)";
  std::string line = "chat template: " + chat.origin + " (hash " + chat.hash + ")";
  if (!chat.named.empty()) {
    line += "; also named:";
    for (const std::string& name : chat.named) line += " " + name;
  }
  return line;
}

std::string plain_format_warning(const ServedChatTemplate& chat, const std::string& model_path) {
  if (!chat.is_plain()) return "";
  return "warning: " + model_path +
         " has no chat template (no tokenizer_config.json chat_template, chat_template.jinja or "
         "GGUF tokenizer.chat_template): chats fall back to the plain \"role: content\" format, which "
         "the model was probably not trained on";
}

ApiRequest prepare_api_request(ApiKind kind, std::string_view body, const Tokenizer& tokenizer,
                               const ServedChatTemplate& chat, const ApiDefaults& defaults,
                               uint64_t seed_if_absent, const std::string& model_id,
                               const std::shared_ptr<const TokenTrie>& trie) {
  if (kind == ApiKind::Chat && !chat.error.empty())
    throw invalid_request("the model's chat template cannot be used: " + chat.error, "chat_template_error");
  ApiRequest request = parse_api_request(kind, body, defaults, seed_if_absent);
  resolve_prompt(request, tokenizer, chat, defaults);
  compile_request_constraint(request, tokenizer, trie);
  if (kind == ApiKind::Chat)
    request.serve.constraint = reply_constraint(request.reply, tokenizer, request.serve.constraint);
  if (request.model.empty()) request.model = model_id;
  return request;
}

std::string response_id(ApiKind kind, uint64_t random) {
  char text[40];
  std::snprintf(text, sizeof text, "%s-%016llx", kind == ApiKind::Chat ? "chatcmpl" : "cmpl",
                static_cast<unsigned long long>(random));
  return text;
}

const char* finish_reason(StopReason reason) {
  return reason == StopReason::MaxTokens ? "length" : "stop";
}

std::string sse_data(const std::string& data) {
  return "data: " + data + "\n\n";
}

namespace {

std::string dump(const json& value) {
  return value.dump(-1, ' ', false, json::error_handler_t::replace);
}

json bytes_of(const std::string& text) {
  json bytes = json::array();
  for (unsigned char c : text) bytes.push_back(static_cast<int>(c));
  return bytes;
}

}  // namespace

ResponseFormatter::ResponseFormatter(const ApiRequest& request, const Tokenizer& tokenizer, std::string id,
                                     int64_t created)
    : kind_(request.kind),
      model_(request.model),
      logprobs_(request.logprobs),
      top_logprobs_(request.top_logprobs),
      include_usage_(request.include_usage),
      tokenizer_(tokenizer),
      id_(std::move(id)),
      created_(created),
      reply_parser_(request.kind == ApiKind::Chat ? make_reply_parser(request.reply) : std::nullopt) {
  logprobs_json_ = empty_logprobs();
}

json ResponseFormatter::empty_logprobs() const {
  if (kind_ == ApiKind::Chat) return {{"content", json::array()}};
  return {{"tokens", json::array()},
          {"token_logprobs", json::array()},
          {"top_logprobs", json::array()},
          {"text_offset", json::array()}};
}

json ResponseFormatter::logprob_entry(const ServeEvent& event) const {
  const auto spell = [&](int32_t token) { return tokenizer_.decode(std::span<const int32_t>(&token, 1)); };
  const std::string token_text = spell(event.token);
  if (kind_ == ApiKind::Chat) {
    json top = json::array();
    for (size_t i = 0; i < event.top.size() && static_cast<int>(i) < top_logprobs_; ++i) {
      const std::string text = spell(event.top[i].token);
      top.push_back({{"token", text}, {"logprob", event.top[i].logprob}, {"bytes", bytes_of(text)}});
    }
    return {{"token", token_text},
            {"logprob", event.logprob},
            {"bytes", bytes_of(token_text)},
            {"top_logprobs", top}};
  }
  json top = json::object();
  for (size_t i = 0; i < event.top.size() && static_cast<int>(i) < top_logprobs_; ++i) {
    const std::string text = spell(event.top[i].token);
    if (!top.contains(text)) top[text] = event.top[i].logprob;
  }
  return {{"token", token_text}, {"logprob", event.logprob}, {"top", top}};
}

void ResponseFormatter::add_logprobs(const ServeEvent& event, json& into) const {
  json entry = logprob_entry(event);
  if (kind_ == ApiKind::Chat) {
    into["content"].push_back(std::move(entry));
    return;
  }
  into["tokens"].push_back(entry["token"]);
  into["token_logprobs"].push_back(entry["logprob"]);
  into["top_logprobs"].push_back(entry["top"]);
  into["text_offset"].push_back(text_offset_);
}

json ResponseFormatter::usage_json() const {
  return {{"prompt_tokens", prompt_tokens_},
          {"completion_tokens", completion_tokens_},
          {"total_tokens", prompt_tokens_ + completion_tokens_},
          {"prompt_tokens_details", {{"cached_tokens", cached_tokens_}}}};
}

json ResponseFormatter::chunk(json choice) const {
  if (choice.is_object()) choice["index"] = index_;
  return {{"id", id_},
          {"object", kind_ == ApiKind::Chat ? "chat.completion.chunk" : "text_completion"},
          {"created", created_},
          {"model", model_},
          {"choices", json::array({std::move(choice)})}};
}

std::optional<json> ResponseFormatter::prelude_chunk() const {
  if (kind_ != ApiKind::Chat) return std::nullopt;
  return chunk({{"index", 0},
                {"delta", {{"role", "assistant"}, {"content", ""}}},
                {"logprobs", nullptr},
                {"finish_reason", nullptr}});
}

std::string ResponseFormatter::stream_prelude() const {
  const std::optional<json> prelude = prelude_chunk();
  return prelude ? sse_data(dump(*prelude)) : "";
}

std::vector<json> ResponseFormatter::stream_chunks(const ServeEvent& event) {
  if (finished_) return {};
  if (event.kind == ServeEvent::Kind::Error) {
    finished_ = true;
    error_ = event.error;
    return {error_object(event.error, "server_error")};
  }
  json choice = {{"index", 0}, {"logprobs", nullptr}, {"finish_reason", nullptr}};
  const auto set_text = [&](const std::string& text) {
    if (kind_ == ApiKind::Chat)
      choice["delta"] = text.empty() ? json::object() : json{{"content", text}};
    else
      choice["text"] = text;
  };
  if (reply_parser_) return reply_chunks(event);
  if (event.kind == ServeEvent::Kind::Token) {
    if (event.text.empty() && !logprobs_) return {};
    set_text(event.text);
    if (logprobs_) {
      json one = empty_logprobs();
      add_logprobs(event, one);
      choice["logprobs"] = std::move(one);
    }
    text_offset_ += event.text.size();
    return {chunk(std::move(choice))};
  }
  finished_ = true;
  stop_reason_ = event.stop_reason;
  prompt_tokens_ = event.prompt_tokens;
  cached_tokens_ = event.cached_tokens;
  completion_tokens_ = event.completion_tokens;
  set_text(event.text);
  choice["finish_reason"] = finish_reason(event.stop_reason);
  std::vector<json> chunks{chunk(std::move(choice))};
  chunks.back()["usage"] = usage_json();
  if (include_usage_) {
    json usage_only = chunk(nullptr);
    usage_only["choices"] = json::array();
    usage_only["usage"] = usage_json();
    chunks.push_back(std::move(usage_only));
  }
  return chunks;
}

// A chat reply split by its parser (server/chat_tools.h): each event's text becomes the deltas of
// what it decided (reasoning, content, tool calls), the first carrying the event's logprobs.
std::vector<json> ResponseFormatter::reply_chunks(const ServeEvent& event) {
  ChatDelta delta = reply_parser_->feed(event.text);
  if (event.kind == ServeEvent::Kind::Done) append_delta(delta, reply_parser_->finish());
  std::vector<json> chunks;
  for (json& one : chat_stream_deltas(delta))
    chunks.push_back(
        chunk({{"index", 0}, {"delta", std::move(one)}, {"logprobs", nullptr}, {"finish_reason", nullptr}}));
  if (event.kind == ServeEvent::Kind::Token) {
    if (logprobs_) {
      if (chunks.empty())
        chunks.push_back(chunk(
            {{"index", 0}, {"delta", json::object()}, {"logprobs", nullptr}, {"finish_reason", nullptr}}));
      json one = empty_logprobs();
      add_logprobs(event, one);
      chunks.front()["choices"][0]["logprobs"] = std::move(one);
    }
    return chunks;
  }
  finished_ = true;
  stop_reason_ = event.stop_reason;
  prompt_tokens_ = event.prompt_tokens;
  cached_tokens_ = event.cached_tokens;
  completion_tokens_ = event.completion_tokens;
  chunks.push_back(chunk({{"index", 0},
                          {"delta", json::object()},
                          {"logprobs", nullptr},
                          {"finish_reason", chat_finish_reason(*reply_parser_, event.stop_reason)}}));
  chunks.back()["usage"] = usage_json();
  if (include_usage_) {
    json usage_only = chunk(nullptr);
    usage_only["choices"] = json::array();
    usage_only["usage"] = usage_json();
    chunks.push_back(std::move(usage_only));
  }
  return chunks;
}

std::string ResponseFormatter::stream_event(const ServeEvent& event) {
  std::string out;
  for (const json& one : stream_chunks(event)) out += sse_data(dump(one));
  if (finished_ && !out.empty()) out += sse_data("[DONE]");
  return out;
}

void ResponseFormatter::collect(const ServeEvent& event) {
  if (finished_) return;
  if (event.kind == ServeEvent::Kind::Error) {
    finished_ = true;
    error_ = event.error.empty() ? "generation failed" : event.error;
    return;
  }
  if (event.kind == ServeEvent::Kind::Token && logprobs_) add_logprobs(event, logprobs_json_);
  if (reply_parser_) {
    reply_parser_->feed(event.text);
    if (event.kind == ServeEvent::Kind::Done) reply_parser_->finish();
  }
  text_ += event.text;
  text_offset_ += event.text.size();
  if (event.kind == ServeEvent::Kind::Done) {
    finished_ = true;
    stop_reason_ = event.stop_reason;
    prompt_tokens_ = event.prompt_tokens;
    cached_tokens_ = event.cached_tokens;
    completion_tokens_ = event.completion_tokens;
  }
}

json ResponseFormatter::response() const {
  if (!error_.empty()) throw ApiError(500, "server_error", error_);
  if (!finished_) throw ApiError(500, "server_error", "the request ended without a result");
  json choice = {{"index", index_},
                 {"logprobs", logprobs_ ? logprobs_json_ : json(nullptr)},
                 {"finish_reason", reply_parser_ ? chat_finish_reason(*reply_parser_, stop_reason_)
                                                 : finish_reason(stop_reason_)}};
  if (reply_parser_)
    choice["message"] = chat_reply_message(*reply_parser_);
  else if (kind_ == ApiKind::Chat)
    choice["message"] = {{"role", "assistant"}, {"content", text_}};
  else
    choice["text"] = text_;
  return {{"id", id_},
          {"object", kind_ == ApiKind::Chat ? "chat.completion" : "text_completion"},
          {"created", created_},
          {"model", model_},
          {"choices", json::array({std::move(choice)})},
          {"usage", usage_json()}};
}

json tokenize_response(const json& body, const Tokenizer& tokenizer) {
  const json* content = field(body, "content");
  if (!content) throw invalid_request("content is required");
  if (!content->is_string()) throw wrong_type("content", "a string", *content);
  return {{"tokens", tokenizer.encode(content->get_ref<const std::string&>())}};
}

json detokenize_response(const json& body, const Tokenizer& tokenizer) {
  const json* tokens = field(body, "tokens");
  if (!tokens) throw invalid_request("tokens is required");
  if (!tokens->is_array()) throw wrong_type("tokens", "a list of token ids", *tokens);
  const std::vector<int32_t> ids = read_token_ids(*tokens, "tokens", size_t{1} << 20);
  for (int32_t id : ids)
    if (id < 0 || id >= tokenizer.vocab_size())
      throw invalid_request("token id " + std::to_string(id) + " is outside the vocabulary [0, " +
                            std::to_string(tokenizer.vocab_size()) + ")");
  try {
    return {{"content", tokenizer.decode(ids)}};
  } catch (const Error& e) {
    throw invalid_request(e.what());
  }
}

json models_response(const std::string& model_id, int64_t created, int64_t max_context) {
  json model = {{"id", model_id}, {"object", "model"}, {"created", created}, {"owned_by", "mambacpp"}};
  if (max_context > 0) model["meta"] = {{"n_ctx", max_context}};
  return {{"object", "list"}, {"data", json::array({model})}};
}

std::string prometheus_metrics(const SchedulerMetrics& m, const HttpCounters& c) {
  std::string out;
  struct Metric {
    const char* name;
    const char* type;
    const char* help;
    uint64_t value;
  };
  const Metric metrics[] = {
      {"mambacpp_http_requests_total", "counter", "Generation requests received over HTTP.",
       c.requests_total},
      {"mambacpp_http_requests_rejected_total", "counter", "Requests refused before queueing (4xx).",
       c.requests_rejected},
      {"mambacpp_http_unauthorized_total", "counter", "Requests refused for a missing or wrong API key.",
       c.requests_unauthorized},
      {"mambacpp_http_queue_full_total", "counter", "Requests refused with 503 because the queue was full.",
       c.queue_full},
      {"mambacpp_http_client_disconnects_total", "counter", "Requests whose client went away before the end.",
       c.client_disconnects},
      {"mambacpp_requests_submitted_total", "counter", "Requests accepted by the scheduler.",
       m.requests_submitted},
      {"mambacpp_requests_finished_total", "counter", "Requests that ran to completion.",
       m.requests_finished},
      {"mambacpp_requests_cancelled_total", "counter", "Requests cancelled (client gone or shutdown).",
       m.requests_cancelled},
      {"mambacpp_requests_failed_total", "counter", "Requests that ended with an error.", m.requests_failed},
      {"mambacpp_prompt_tokens_total", "counter", "Prompt tokens of all requests.", m.prompt_tokens},
      {"mambacpp_prompt_tokens_cached_total", "counter", "Prompt tokens served from the prefix cache.",
       m.cached_prompt_tokens},
      {"mambacpp_generated_tokens_total", "counter", "Tokens generated.", m.generated_tokens},
      {"mambacpp_queue_depth", "gauge", "Requests waiting for a slot.", m.waiting},
      {"mambacpp_active_requests", "gauge", "Requests holding a slot.", m.active},
      {"mambacpp_prefix_cache_entries", "gauge", "States in the prefix cache.", m.cache_entries},
      {"mambacpp_prefix_cache_bytes", "gauge", "Bytes held by the prefix cache.", m.cache_bytes},
      {"mambacpp_prefix_cache_hits_total", "counter", "Prefix-cache lookups that found a cached state.",
       m.cache_hits},
      {"mambacpp_prefix_cache_misses_total", "counter", "Prefix-cache lookups that found none.",
       m.cache_misses},
      {"mambacpp_prompt_tokens_stored_total", "counter",
       "Prompt tokens resumed from the shared prefix store (--slot-persist).", m.stored_prompt_tokens},
      {"mambacpp_prefix_store_hits_total", "counter", "Prefix-store lookups that resumed from a file.",
       m.store.hits},
      {"mambacpp_prefix_store_misses_total", "counter", "Prefix-store lookups that found no usable file.",
       m.store.misses},
      {"mambacpp_prefix_store_rejected_total", "counter",
       "Prefix-store files skipped as unreadable, corrupt or mismatching.", m.store.rejected},
      {"mambacpp_prefix_store_written_total", "counter", "Prefix-store files written.", m.store.written},
      {"mambacpp_prefix_store_dropped_total", "counter", "States not written because the queue was full.",
       m.store.dropped},
      {"mambacpp_prefix_store_write_errors_total", "counter", "Prefix-store writes that failed.",
       m.store.write_errors},
      {"mambacpp_prefix_store_evicted_total", "counter", "Prefix-store files evicted by this server.",
       m.store.evicted},
      {"mambacpp_step_rows_total", "counter", "Positions run by all scheduler steps (prefill and decode).",
       m.step_rows},
  };
  for (const Metric& metric : metrics)
    out += std::string("# HELP ") + metric.name + " " + metric.help + "\n# TYPE " + metric.name + " " +
           metric.type + "\n" + metric.name + " " + std::to_string(metric.value) + "\n";
  out +=
      "# HELP mambacpp_step_seconds Duration of scheduler steps (recent steps for the quantiles).\n"
      "# TYPE mambacpp_step_seconds summary\n";
  const char* quantiles[] = {"0.5", "0.9", "0.99"};
  for (size_t i = 0; i < 3; ++i) {
    const double value = i < m.step_seconds_quantiles.size() ? m.step_seconds_quantiles[i] : NAN;
    char number[64];
    std::snprintf(number, sizeof number, "%.9g", value);
    out += std::string("mambacpp_step_seconds{quantile=\"") + quantiles[i] + "\"} " +
           (std::isnan(value) ? "NaN" : number) + "\n";
  }
  char sum[64];
  std::snprintf(sum, sizeof sum, "%.9g", m.step_seconds_sum);
  out += std::string("mambacpp_step_seconds_sum ") + sum + "\nmambacpp_step_seconds_count " +
         std::to_string(m.steps) + "\n";
  return out;
}

}  // namespace mb::server

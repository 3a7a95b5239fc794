// SPDX-License-Identifier: MIT
#include "server/request_surface.h"

#include <algorithm>
#include <charconv>
#include <climits>
#include <cmath>
#include <limits>

#include "core/json_text.h"

namespace mb::server {

using nlohmann::json;

namespace {

// The field's value, or null when absent: OpenAI treats an explicit null as "not given".
const json* surface_field(const json& body, const char* name) {
  const auto it = body.find(name);
  if (it == body.end() || it->is_null()) return nullptr;
  return &*it;
}

ApiError surface_wrong_type(const std::string& name, const char* expected, const json& value) {
  return invalid_request(name + " must be " + expected + ", got " + json_excerpt(value));
}

// An integer (an integral float such as 2.0 counts) in [min, max], named in the error.
std::optional<int64_t> surface_integer(const json& body, const char* name, int64_t min, int64_t max) {
  const json* value = surface_field(body, name);
  if (!value) return std::nullopt;
  double d = 0;
  if (value->is_number_integer() || value->is_number_unsigned()) {
    d = value->get<double>();
  } else if (value->is_number_float()) {
    d = value->get<double>();
    if (d != std::floor(d)) throw surface_wrong_type(name, "an integer", *value);
  } else {
    throw surface_wrong_type(name, "an integer", *value);
  }
  if (!(d >= static_cast<double>(min) && d <= static_cast<double>(max)))
    throw invalid_request(std::string(name) + " must be in [" + std::to_string(min) + ", " +
                          std::to_string(max) + "], got " + json_excerpt(*value));
  return static_cast<int64_t>(d);
}

float read_penalty(const json& body, const char* name) {
  const json* value = surface_field(body, name);
  if (!value) return 0.0f;
  if (!value->is_number()) throw surface_wrong_type(name, "a number", *value);
  const double v = value->get<double>();
  if (!(v >= -2.0 && v <= 2.0))
    throw invalid_request(std::string(name) + " must be in [-2, 2] (0 disables it), got " +
                          json_excerpt(*value));
  return static_cast<float>(v);
}

// One bias: a number in [-100, 100], or false for a ban.
float read_bias(const json& value, const std::string& where) {
  if (value.is_boolean() && !value.get<bool>()) return -std::numeric_limits<float>::infinity();
  if (!value.is_number()) throw surface_wrong_type(where, "a number in [-100, 100] or false (a ban)", value);
  const double bias = value.get<double>();
  if (!(std::fabs(bias) <= kMaxLogitBias))
    throw invalid_request(where + " must be in [-100, 100] or false (a ban), got " + json_excerpt(value));
  return static_cast<float>(bias);
}

int32_t read_bias_id(const json& value, const std::string& where) {
  if (!value.is_number_integer() || value.get<int64_t>() < 0 || value.get<int64_t>() > INT32_MAX)
    throw surface_wrong_type(where, "a token id (an integer >= 0)", value);
  return static_cast<int32_t>(value.get<int64_t>());
}

}  // namespace

void read_penalties_and_bias(const json& body, SamplingParams& sampling) {
  sampling.presence_penalty = read_penalty(body, "presence_penalty");
  sampling.frequency_penalty = read_penalty(body, "frequency_penalty");
  const json* bias = surface_field(body, "logit_bias");
  if (!bias) return;
  if (!bias->is_object() && !bias->is_array())
    throw surface_wrong_type("logit_bias", "an object of token ids to biases, or a list of [id, bias] pairs",
                             *bias);
  if (bias->size() > kMaxLogitBiasEntries)
    throw invalid_request("logit_bias has " + std::to_string(bias->size()) + " entries, more than the " +
                          std::to_string(kMaxLogitBiasEntries) + " a request may carry");
  std::vector<std::pair<int32_t, float>>& out = sampling.logit_bias;
  out.clear();
  if (bias->is_object()) {
    for (const auto& [key, value] : bias->items()) {
      // OpenAI's keys are token ids written in decimal.
      int32_t id = -1;
      const auto [end, error] = std::from_chars(key.data(), key.data() + key.size(), id);
      if (key.empty() || error != std::errc() || end != key.data() + key.size() || id < 0)
        throw invalid_request("logit_bias keys must be token ids (decimal integers >= 0), got " +
                              json_excerpt(json(key)));
      out.emplace_back(id, read_bias(value, "logit_bias[\"" + key + "\"]"));
    }
  } else {
    for (size_t i = 0; i < bias->size(); ++i) {
      const json& pair = (*bias)[i];
      const std::string where = "logit_bias[" + std::to_string(i) + "]";
      if (!pair.is_array() || pair.size() != 2) throw surface_wrong_type(where, "an [id, bias] pair", pair);
      out.emplace_back(read_bias_id(pair[0], where + "[0]"), read_bias(pair[1], where + "[1]"));
    }
  }
  if (const auto problem = find_sampling_problem(sampling))
    throw invalid_request(std::string(sampling_field_name(problem->field)) + " must be " +
                          problem->requirement + ", got " + problem->value);
}

void check_logit_bias_vocabulary(const SamplingParams& sampling, const Tokenizer& tokenizer,
                                 int64_t vocab_size) {
  int64_t n_valid = tokenizer.vocab_size();
  if (vocab_size > 0) n_valid = std::min(n_valid, vocab_size);
  try {
    check_logit_bias_ids(sampling, static_cast<int32_t>(n_valid));
  } catch (const Error& e) {
    throw invalid_request(e.what());
  }
}

int read_choice_count(const json& body) {
  return static_cast<int>(surface_integer(body, "n", 1, kMaxChoices).value_or(1));
}

std::optional<int> read_max_tokens(const json& body) {
  const auto max_tokens = surface_integer(body, "max_tokens", 0, INT_MAX);
  const auto max_completion_tokens = surface_integer(body, "max_completion_tokens", 0, INT_MAX);
  if (max_tokens && max_completion_tokens && *max_tokens != *max_completion_tokens)
    throw invalid_request("max_tokens (" + std::to_string(*max_tokens) + ") and max_completion_tokens (" +
                          std::to_string(*max_completion_tokens) +
                          ") differ: they are two names of one limit, give one");
  if (max_completion_tokens) return static_cast<int>(*max_completion_tokens);
  if (max_tokens) return static_cast<int>(*max_tokens);
  return std::nullopt;
}

void read_stream_options(const json& body, bool& include_usage) {
  const json* options = surface_field(body, "stream_options");
  if (!options) return;
  if (!options->is_object()) throw surface_wrong_type("stream_options", "an object", *options);
  for (const char* name : {"include_usage", "continuous_usage_stats"}) {
    const json* value = surface_field(*options, name);
    if (value && !value->is_boolean())
      throw surface_wrong_type(std::string("stream_options.") + name, "true or false", *value);
  }
  const json* usage = surface_field(*options, "include_usage");
  include_usage = usage && usage->get<bool>();
  if (const json* continuous = surface_field(*options, "continuous_usage_stats");
      continuous && continuous->get<bool>())
    throw invalid_request(
        "stream_options.continuous_usage_stats is not supported (usage comes with the final chunk, and "
        "with include_usage in a chunk of its own)");
}

void refuse_unsupported_fields(const json& body, ApiKind kind) {
  if (auto best_of = surface_integer(body, "best_of", INT64_MIN, INT64_MAX); best_of && *best_of != 1)
    throw invalid_request("best_of must be 1 (use n for several choices), got " + std::to_string(*best_of));
  if (const json* echo = surface_field(body, "echo")) {
    if (!echo->is_boolean()) throw surface_wrong_type("echo", "true or false", *echo);
    if (echo->get<bool>()) throw invalid_request("echo is not supported");
  }
  if (const json* suffix = surface_field(body, "suffix");
      suffix && !(suffix->is_string() && suffix->get_ref<const std::string&>().empty()))
    throw invalid_request("suffix is not supported (no fill-in-the-middle): got " + json_excerpt(*suffix));
  if (kind != ApiKind::Chat) return;
  if (const json* audio = surface_field(body, "audio"))
    throw invalid_request("audio is not supported (the model answers in text only): got " +
                          json_excerpt(*audio));
  if (const json* modalities = surface_field(body, "modalities")) {
    if (!modalities->is_array()) throw surface_wrong_type("modalities", "a list of strings", *modalities);
    for (const json& one : *modalities)
      if (one != "text")
        throw invalid_request("modalities may hold only \"text\" (the model answers in text only), got " +
                              json_excerpt(one));
  }
  if (const json* search = surface_field(body, "web_search_options"))
    throw invalid_request("web_search_options is not supported (the server does not search the web): got " +
                          json_excerpt(*search));
  for (const char* name : {"functions", "function_call"})
    if (const json* value = surface_field(body, name))
      throw invalid_request(std::string(name) +
                            " is not supported (deprecated by OpenAI: use tools and tool_choice): got " +
                            json_excerpt(*value));
  if (const json* verbosity = surface_field(body, "verbosity"); verbosity && *verbosity != "medium")
    throw invalid_request("verbosity is not supported (only \"medium\", the default, is accepted): got " +
                          json_excerpt(*verbosity));
}

ChoicesFormatter::ChoicesFormatter(const ApiRequest& request, const Tokenizer& tokenizer,
                                   const std::string& id, int64_t created)
    : kind_(request.kind), include_usage_(request.include_usage) {
  const int n = std::max(1, request.serve.n);
  choices_.reserve(static_cast<size_t>(n));
  if (n == 1) {
    choices_.emplace_back(request, tokenizer, id, created);
  } else {
    // With several choices the usage goes out once for all of them, from here. (The copy of the
    // request is made only then: a chat's messages can be large.)
    ApiRequest each = request;
    each.include_usage = false;
    for (int i = 0; i < n; ++i) {
      choices_.emplace_back(each, tokenizer, id, created);
      choices_.back().set_choice_index(i);
    }
  }
  open_ = choices_.size();
}

json ChoicesFormatter::usage_json() const {
  return {{"prompt_tokens", prompt_tokens_},
          {"completion_tokens", completion_tokens_},
          {"total_tokens", prompt_tokens_ + completion_tokens_},
          {"prompt_tokens_details", {{"cached_tokens", cached_tokens_}}}};
}

std::vector<json> ChoicesFormatter::prelude_chunks() const {
  std::vector<json> chunks;
  for (const ResponseFormatter& choice : choices_)
    if (std::optional<json> prelude = choice.prelude_chunk()) chunks.push_back(std::move(*prelude));
  return chunks;
}

std::string ChoicesFormatter::stream_prelude() const {
  std::string out;
  for (const json& chunk : prelude_chunks())
    out += sse_data(chunk.dump(-1, ' ', false, json::error_handler_t::replace));
  return out;
}

std::vector<json> ChoicesFormatter::stream_chunks(const ServeEvent& event) {
  if (choices_.size() == 1) {
    std::vector<json> chunks = choices_[0].stream_chunks(event);
    finished_ = choices_[0].finished();
    return chunks;
  }
  if (finished_ || event.choice < 0 || static_cast<size_t>(event.choice) >= choices_.size()) return {};
  if (event.kind == ServeEvent::Kind::Error) {
    finished_ = true;
    return {error_object(event.error, "server_error")};
  }
  std::vector<json> chunks = choices_[static_cast<size_t>(event.choice)].stream_chunks(event);
  if (event.kind != ServeEvent::Kind::Done || chunks.empty()) return chunks;
  prompt_tokens_ = event.prompt_tokens;
  cached_tokens_ = event.cached_tokens;
  completion_tokens_ += event.completion_tokens;
  // A choice's own usage would count the prompt once per choice: the total goes on the last.
  for (json& chunk : chunks) chunk.erase("usage");
  if (--open_ > 0) return chunks;
  finished_ = true;
  chunks.back()["usage"] = usage_json();
  if (include_usage_) {
    json usage_only = chunks.back();
    usage_only["choices"] = json::array();
    chunks.push_back(std::move(usage_only));
  }
  return chunks;
}

std::string ChoicesFormatter::stream_event(const ServeEvent& event) {
  if (choices_.size() == 1) {
    std::string out = choices_[0].stream_event(event);
    finished_ = choices_[0].finished();
    return out;
  }
  std::string out;
  for (const json& chunk : stream_chunks(event))
    out += sse_data(chunk.dump(-1, ' ', false, json::error_handler_t::replace));
  if (finished_ && !out.empty()) out += sse_data("[DONE]");
  return out;
}

void ChoicesFormatter::collect(const ServeEvent& event) {
  if (finished_ || event.choice < 0 || static_cast<size_t>(event.choice) >= choices_.size()) return;
  ResponseFormatter& choice = choices_[static_cast<size_t>(event.choice)];
  choice.collect(event);
  if (event.kind == ServeEvent::Kind::Error) {
    finished_ = true;  // response() throws this choice's error
    return;
  }
  if (event.kind != ServeEvent::Kind::Done) return;
  prompt_tokens_ = event.prompt_tokens;
  cached_tokens_ = event.cached_tokens;
  completion_tokens_ += event.completion_tokens;
  finished_ = --open_ == 0;
}

json ChoicesFormatter::response() const {
  // A choice that ended with an error (or never ended) throws its ApiError here.
  if (choices_.size() == 1) return choices_[0].response();
  json result;
  json choices = json::array();
  for (const ResponseFormatter& choice : choices_) {
    json one = choice.response();
    choices.push_back(std::move(one["choices"][0]));
    if (result.is_null()) result = std::move(one);
  }
  result["choices"] = std::move(choices);
  result["usage"] = usage_json();
  return result;
}

}  // namespace mb::server

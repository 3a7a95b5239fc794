// SPDX-License-Identifier: MIT
// OpenAI's Responses API (/v1/responses) in its stateless form, translated onto chat completions:
// a request's `instructions`, `input` items and `tools` become a chat-completions body (JSON text
// in a fixed key order, so one conversation always renders to the same prompt and its follow-up
// turns resume from the prefix cache), which then goes through prepare_api_request and the
// scheduler like any chat request; the reply, split into reasoning, text and tool calls
// (api_formatter.h), comes back as Responses output items and typed stream events.
//
// `previous_response_id` continues a conversation the server kept (ResponseStore: in memory, for
// its lifetime, bounded in count and bytes, least recently used dropped first); `store: false`
// keeps nothing. The instructions of an earlier response are not carried over, as OpenAI does.
#pragma once

#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>

#include "server/api_formatter.h"

namespace mb::server {

// The conversations of earlier responses (chat messages as JSON text), by response id.
class ResponseStore {
 public:
  explicit ResponseStore(size_t max_entries = 1024, size_t max_bytes = size_t{64} << 20);
  // Keeps `messages` (a JSON list of chat messages) under `id`, dropping the least recently used
  // conversations past the limits; one larger than max_bytes is not kept.
  void put(const std::string& id, const nlohmann::ordered_json& messages);
  // The conversation kept under `id`, or nothing; a hit makes it the most recently used.
  std::optional<nlohmann::ordered_json> get(const std::string& id);
  size_t size() const;

 private:
  mutable std::mutex mutex_;
  size_t max_entries_, max_bytes_, bytes_ = 0;
  std::list<std::pair<std::string, std::string>> entries_;  // most recently used first
  std::unordered_map<std::string, std::list<std::pair<std::string, std::string>>::iterator> index_;
};

struct ResponsesRequest {
  std::string chat_body;                // the chat-completions request
  nlohmann::ordered_json conversation;  // its messages after the instructions (what a follow-up continues)
  nlohmann::ordered_json echo;          // the request's settings the response object repeats
  bool store = true;
};

// Translates a /v1/responses body. Throws ApiError: 400 naming the field for anything malformed
// or that this server cannot honour (an image or file input, a built-in tool such as web_search,
// background mode, stored prompts and conversations), and 400 previous_response_not_found for an
// unknown previous_response_id. `max_items` bounds the input items (ApiDefaults::max_messages).
ResponsesRequest translate_responses_request(std::string_view body, ResponseStore* store, size_t max_items);

// Appends Responses input items (a list) to a list of chat messages; what translate uses, and
// what turns a response's output items into the conversation a follow-up continues.
void append_response_items(const nlohmann::ordered_json& items, nlohmann::ordered_json& messages,
                           size_t max_items);

// Formats one response: its output items and usage, or its typed stream events (each with its
// sequence_number). When it ends and `store` was asked for, its conversation goes into `store`.
class ResponsesFormatter : public ApiFormatter {
 public:
  ResponsesFormatter(const ApiRequest& request, ResponsesRequest translated, ResponseStore* store,
                     std::unique_ptr<ReplySplitter> splitter, std::string id, uint64_t random,
                     int64_t created, bool streaming);
  std::string stream_prelude() override;
  std::string stream_event(const ServeEvent& event) override;
  void collect(const ServeEvent& event) override;
  nlohmann::json response() override;
  bool finished() const override { return finished_; }

 private:
  class Events;
  void take(const ServeEvent& event);
  nlohmann::ordered_json item(size_t index, bool done) const;
  nlohmann::ordered_json object(const char* status) const;
  void emit(const char* type, nlohmann::ordered_json fields);

  ResponsesRequest translated_;
  ResponseStore* store_;
  std::unique_ptr<ReplySplitter> splitter_;
  std::string id_, model_;
  uint64_t random_;
  int64_t created_;
  bool streaming_;
  ReplyBlocks blocks_;
  std::string out_;  // stream text not yet handed out
  int64_t sequence_ = 0;
  bool finished_ = false;
  std::string error_;
  StopReason stop_reason_ = StopReason::MaxTokens;
  int64_t prompt_tokens_ = 0, cached_tokens_ = 0, completion_tokens_ = 0;
};

}  // namespace mb::server

// SPDX-License-Identifier: MIT
// Anthropic's Messages API (/v1/messages, /v1/messages/count_tokens) translated onto chat
// completions: `system`, `messages` with text / tool_use / tool_result blocks and `tools` become
// a chat-completions body (JSON text in a fixed key order, so a client that re-sends the whole
// conversation every turn renders the same prompt prefix and resumes from the prefix cache),
// which goes through prepare_api_request and the scheduler like any chat request. The reply,
// split into thinking, text and tool_use blocks (api_formatter.h), comes back in Anthropic's
// message shape or its event stream; errors in Anthropic's {"type": "error", "error": {...}}.
#pragma once

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "server/api_formatter.h"

namespace mb::server {

struct MessagesRequest {
  std::string chat_body;           // the chat-completions request
  std::vector<std::string> stops;  // stop_sequences, to report which one ended the reply
};

// Translates a /v1/messages body (`count_only`: a /v1/messages/count_tokens body, which has no
// max_tokens). Throws ApiError (400) naming the field for anything malformed or that this server
// cannot honour: an image or document block, a server tool (web_search, bash, ...),
// max_tokens missing or below 1. `max_messages` bounds the chat messages made.
MessagesRequest translate_messages_request(std::string_view body, bool count_only, size_t max_messages);

// Anthropic's error type of an HTTP status ("invalid_request_error", "authentication_error",
// "not_found_error", "api_error", "overloaded_error", ...), and its error body.
const char* anthropic_error_type(int status);
std::string anthropic_error_json(int status, const std::string& message);
// The paths answered in Anthropic's shapes.
bool is_messages_path(const std::string& path);

// /v1/messages/count_tokens' answer for a prompt of `tokens` tokens.
nlohmann::json count_tokens_response(size_t tokens);

class MessagesFormatter : public ApiFormatter {
 public:
  MessagesFormatter(const ApiRequest& request, MessagesRequest translated,
                    std::unique_ptr<ReplySplitter> splitter, std::string id, bool streaming);
  std::string stream_prelude() override;
  std::string stream_event(const ServeEvent& event) override;
  void collect(const ServeEvent& event) override;
  nlohmann::json response() override;
  bool finished() const override { return finished_; }

 private:
  class Events;
  void take(const ServeEvent& event);
  nlohmann::ordered_json block(size_t index) const;
  nlohmann::ordered_json usage() const;
  const char* stop_reason() const;
  nlohmann::ordered_json stop_sequence() const;

  MessagesRequest translated_;
  std::unique_ptr<ReplySplitter> splitter_;
  std::string id_, model_;
  bool streaming_;
  ReplyBlocks blocks_;
  std::string out_, text_;
  bool finished_ = false;
  std::string error_;
  StopReason stop_reason_ = StopReason::MaxTokens;
  std::string stop_string_;  // the stop sequence that ended the reply (ServeEvent::stop_string)
  int64_t prompt_tokens_ = 0, cached_tokens_ = 0, completion_tokens_ = 0;
};

}  // namespace mb::server

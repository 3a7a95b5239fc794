// SPDX-License-Identifier: MIT
// What the three chat APIs (/v1/chat/completions, /v1/responses, /v1/messages) share once a
// request has become a chat-completions ApiRequest: the server's request life cycle (admission,
// streaming, cancel on disconnect, logging; http_server.cc) drives an ApiFormatter per request,
// and the Responses and Messages formatters build their items / content blocks from the same
// split of the reply (ReplySplitter: content, reasoning, tool calls) through ReplyBlocks.
#pragma once

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "server/chat_output.h"
#include "server/openai_api.h"

namespace mb::server {

// One API's formatting of a request's scheduler events, as one JSON body or as server-sent events.
class ApiFormatter {
 public:
  virtual ~ApiFormatter() = default;
  // Streaming: the text sent before any event, then each event's text.
  virtual std::string stream_prelude() = 0;
  virtual std::string stream_event(const ServeEvent& event) = 0;
  // Non-streaming: every event, then the body. A request that failed throws ApiError (500).
  virtual void collect(const ServeEvent& event) = 0;
  virtual nlohmann::json response() = 0;
  virtual bool finished() const = 0;
};

// /v1/chat/completions and /v1/completions: ResponseFormatter as it is.
std::unique_ptr<ApiFormatter> completions_formatter(const ApiRequest& request, const Tokenizer& tokenizer,
                                                    std::string id, int64_t created);

// Splits a reply's text into content, reasoning and tool calls as it is generated.
class ReplySplitter {
 public:
  virtual ~ReplySplitter() = default;
  virtual ChatDelta feed(std::string_view text) = 0;
  virtual ChatDelta finish() = 0;
};
// A splitter that is the chat output parser (server/chat_output.h).
std::unique_ptr<ReplySplitter> parser_splitter(ChatOutputParser parser);
// The splitter for a request: the chat output parser with the checkpoint's reasoning and tool-call
// format (make_reply_parser, server/chat_tools.h), or, where there is nothing to split, one that
// passes everything as content.
std::unique_ptr<ReplySplitter> make_reply_splitter(const ApiRequest& request, const ServedChatTemplate& chat);

// A reply as a list of blocks in the order the model produced them: reasoning, text and tool calls
// (a Responses output item or an Anthropic content block each).
struct ReplyBlock {
  enum class Kind { Reasoning, Text, ToolCall } kind = Kind::Text;
  std::string text;  // the reasoning, the text, or the call's arguments (JSON text)
  std::string call_id, name;
};

class ReplyBlocks {
 public:
  // Told when a block opens, grows by a piece, and closes; `index` is its place in blocks().
  class Listener {
   public:
    virtual ~Listener() = default;
    virtual void opened(size_t index) = 0;
    virtual void grew(size_t index, const std::string& piece) = 0;
    virtual void closed(size_t index) = 0;
  };
  // A delta's reasoning, then its content, then its tool-call pieces: a block of another kind
  // (or another call) closes the open one.
  void add(const ChatDelta& delta, Listener* listener);
  // Closes the open block, if any.
  void close(Listener* listener);
  const std::vector<ReplyBlock>& blocks() const { return blocks_; }
  bool has_tool_calls() const;

 private:
  void append(ReplyBlock::Kind kind, const std::string& piece, Listener* listener,
              const ChatDelta::ToolCallPiece* call = nullptr);
  std::vector<ReplyBlock> blocks_;
  bool open_ = false;
  size_t open_call_ = SIZE_MAX;  // the tool-call index (ChatDelta's) of the open block
};

// A request body parsed as parse_request_body does (bounded; a 400 naming the problem), kept in
// the client's key order: what the translated chat request is built from (server/chat_request.h).
nlohmann::ordered_json parse_in_client_order(std::string_view body);

// "PREFIX" and 24 hex digits of `random` and `more` ("resp_", "msg_", "fc_", ...).
std::string prefixed_id(const char* prefix, uint64_t random, uint64_t more);

// An SSE event with a name: "event: NAME\ndata: JSON\n\n".
std::string sse_named(const std::string& name, const nlohmann::ordered_json& data);

}  // namespace mb::server

// SPDX-License-Identifier: MIT
#include "server/api_formatter.h"

#include <cstdio>

#include "server/request_surface.h"

namespace mb::server {

namespace {

class CompletionsFormatter : public ApiFormatter {
 public:
  CompletionsFormatter(const ApiRequest& request, const Tokenizer& tokenizer, std::string id, int64_t created)
      : formatter_(request, tokenizer, std::move(id), created) {}
  std::string stream_prelude() override { return formatter_.stream_prelude(); }
  std::string stream_event(const ServeEvent& event) override { return formatter_.stream_event(event); }
  void collect(const ServeEvent& event) override { formatter_.collect(event); }
  nlohmann::json response() override { return formatter_.response(); }
  bool finished() const override { return formatter_.finished(); }

 private:
  ChoicesFormatter formatter_;  // n choices (server/request_surface.h); one is ResponseFormatter as it is
};

// Until the chat output parser is wired in: the whole reply is content.
class ContentOnlySplitter : public ReplySplitter {
 public:
  ChatDelta feed(std::string_view text) override {
    ChatDelta delta;
    delta.content = std::string(text);
    return delta;
  }
  ChatDelta finish() override { return {}; }
};

class ParserSplitter : public ReplySplitter {
 public:
  explicit ParserSplitter(ChatOutputParser parser) : parser_(std::move(parser)) {}
  ChatDelta feed(std::string_view text) override { return parser_.feed(text); }
  ChatDelta finish() override { return parser_.finish(); }

 private:
  ChatOutputParser parser_;
};

}  // namespace

std::unique_ptr<ReplySplitter> parser_splitter(ChatOutputParser parser) {
  return std::make_unique<ParserSplitter>(std::move(parser));
}

std::unique_ptr<ApiFormatter> completions_formatter(const ApiRequest& request, const Tokenizer& tokenizer,
                                                    std::string id, int64_t created) {
  return std::make_unique<CompletionsFormatter>(request, tokenizer, std::move(id), created);
}

std::unique_ptr<ReplySplitter> make_reply_splitter(const ApiRequest& request, const ServedChatTemplate&) {
  // The request's reply settings were settled against the served template when its prompt was
  // rendered (settle_chat_reply): the same split as /v1/chat/completions makes.
  if (std::optional<ChatOutputParser> parser = make_reply_parser(request.reply))
    return parser_splitter(std::move(*parser));
  return std::make_unique<ContentOnlySplitter>();
}

void ReplyBlocks::append(ReplyBlock::Kind kind, const std::string& piece, Listener* listener,
                         const ChatDelta::ToolCallPiece* call) {
  const bool same = open_ && blocks_.back().kind == kind &&
                    (kind != ReplyBlock::Kind::ToolCall || (call && call->index == open_call_));
  if (!same) {
    close(listener);
    ReplyBlock block;
    block.kind = kind;
    if (call) {
      block.call_id = call->id;
      block.name = call->name;
      open_call_ = call->index;
    }
    blocks_.push_back(std::move(block));
    open_ = true;
    if (listener) listener->opened(blocks_.size() - 1);
  }
  if (piece.empty()) return;
  blocks_.back().text += piece;
  if (listener) listener->grew(blocks_.size() - 1, piece);
}

void ReplyBlocks::add(const ChatDelta& delta, Listener* listener) {
  if (!delta.reasoning.empty()) append(ReplyBlock::Kind::Reasoning, delta.reasoning, listener);
  if (!delta.content.empty()) append(ReplyBlock::Kind::Text, delta.content, listener);
  for (const ChatDelta::ToolCallPiece& piece : delta.tool_calls)
    append(ReplyBlock::Kind::ToolCall, piece.arguments, listener, &piece);
}

void ReplyBlocks::close(Listener* listener) {
  if (!open_) return;
  open_ = false;
  open_call_ = SIZE_MAX;
  if (listener) listener->closed(blocks_.size() - 1);
}

bool ReplyBlocks::has_tool_calls() const {
  for (const ReplyBlock& block : blocks_)
    if (block.kind == ReplyBlock::Kind::ToolCall) return true;
  return false;
}

nlohmann::ordered_json parse_in_client_order(std::string_view body) {
  parse_request_body(body);  // the bounds and the error messages; read again to keep the order
  try {
    return nlohmann::ordered_json::parse(body);
  } catch (const nlohmann::json::exception& e) {
    throw invalid_request(std::string("the request body is not valid JSON (") + e.what() + ")",
                          "invalid_json");
  }
}

std::string prefixed_id(const char* prefix, uint64_t random, uint64_t more) {
  char text[64];
  std::snprintf(text, sizeof text, "%s%016llx%08llx", prefix, static_cast<unsigned long long>(random),
                static_cast<unsigned long long>(more & 0xffffffffu));
  return text;
}

std::string sse_named(const std::string& name, const nlohmann::ordered_json& data) {
  return "event: " + name +
         "\ndata: " + data.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace) + "\n\n";
}

}  // namespace mb::server

// SPDX-License-Identifier: MIT
#include "server/messages_api.h"

#include <utility>

#include "core/json_text.h"
#include "server/agent_json.h"

namespace mb::server {

using agent_json::excerpt_of;
using agent_json::member;
using agent_json::ojson;
using agent_json::string_member;
using agent_json::wrong_value;

namespace {

ApiError unsupported_block(const std::string& at, const std::string& type) {
  return invalid_request(at + " is a '" + type +
                             "' block, which this server does not take (the models it serves read text only)",
                         "unsupported_content");
}

// Text blocks as a chat content: one becomes a string, several a list of text parts (joined as
// chat requests' parts are), none an empty string.
ojson text_content(const ojson& parts) {
  if (parts.size() == 1) return parts[0]["text"];
  if (parts.empty()) return "";
  return parts;
}

// A content given as a string or as text blocks (system, tool_result's content).
ojson text_blocks(const ojson& content, const std::string& where) {
  if (content.is_string()) return content;
  if (!content.is_array()) throw wrong_value(where, "a string or a list of text blocks", content);
  ojson parts = ojson::array();
  for (size_t i = 0; i < content.size(); ++i) {
    const std::string at = where + "[" + std::to_string(i) + "]";
    if (!content[i].is_object()) throw wrong_value(at, "a content block object", content[i]);
    const std::string& type = string_member(content[i], "type", at);
    if (type != "text") throw unsupported_block(at, type);
    parts.push_back(ojson{{"type", "text"}, {"text", string_member(content[i], "text", at)}});
  }
  return text_content(parts);
}

// One Anthropic message as chat messages: a user's tool_result blocks become "tool" messages (in
// their order, before the text that follows them), an assistant's tool_use blocks its tool_calls.
void append_message(const ojson& message, const std::string& at, ojson& out) {
  if (!message.is_object()) throw wrong_value(at, "a message object", message);
  const std::string& role = string_member(message, "role", at);
  if (role != "user" && role != "assistant")
    throw invalid_request(at + ".role must be user or assistant, got '" + role + "'");
  const ojson* content = member(message, "content");
  if (!content) throw invalid_request(at + ".content is required");
  if (content->is_string()) {
    out.push_back(ojson{{"role", role}, {"content", *content}});
    return;
  }
  if (!content->is_array())
    throw wrong_value(at + ".content", "a string or a list of content blocks", *content);
  ojson texts = ojson::array(), calls = ojson::array();
  const auto flush_texts = [&] {
    if (texts.empty()) return;
    out.push_back(ojson{{"role", role}, {"content", text_content(texts)}});
    texts = ojson::array();
  };
  for (size_t i = 0; i < content->size(); ++i) {
    const ojson& block = (*content)[i];
    const std::string where = at + ".content[" + std::to_string(i) + "]";
    if (!block.is_object()) throw wrong_value(where, "a content block object", block);
    const std::string& type = string_member(block, "type", where);
    if (type == "text") {
      texts.push_back(ojson{{"type", "text"}, {"text", string_member(block, "text", where)}});
    } else if (type == "tool_use" && role == "assistant") {
      const ojson* input = member(block, "input");
      if (!input || !input->is_object())
        throw wrong_value(where + ".input", "an object", input ? *input : ojson());
      calls.push_back(ojson{{"id", string_member(block, "id", where)},
                            {"type", "function"},
                            {"function",
                             {{"name", string_member(block, "name", where)},
                              {"arguments", input->dump(-1, ' ', false, ojson::error_handler_t::replace)}}}});
    } else if (type == "tool_result" && role == "user") {
      flush_texts();
      const ojson* result = member(block, "content");
      if (const ojson* is_error = member(block, "is_error"); is_error && !is_error->is_boolean())
        throw wrong_value(where + ".is_error", "true or false", *is_error);
      out.push_back(ojson{{"role", "tool"},
                          {"tool_call_id", string_member(block, "tool_use_id", where)},
                          {"content", result ? text_blocks(*result, where + ".content") : ojson("")}});
    } else if (type == "thinking" || type == "redacted_thinking") {
      // Earlier turns' thinking: chat templates leave it out of the prompt, and so does this.
    } else if (type == "tool_use" || type == "tool_result") {
      throw invalid_request(where + " is a '" + type + "' block in a " + role + " message");
    } else {
      throw unsupported_block(where, type);
    }
  }
  if (!calls.empty()) {
    ojson assistant = {{"role", "assistant"},
                       {"content", texts.empty() ? ojson(nullptr) : text_content(texts)}};
    assistant["tool_calls"] = std::move(calls);
    out.push_back(std::move(assistant));
  } else {
    flush_texts();
  }
}

ojson chat_tools_of(const ojson& tools) {
  if (!tools.is_array()) throw wrong_value("tools", "a list of tools", tools);
  ojson result = ojson::array();
  for (size_t i = 0; i < tools.size(); ++i) {
    const ojson& tool = tools[i];
    const std::string at = "tools[" + std::to_string(i) + "]";
    if (!tool.is_object()) throw wrong_value(at, "a tool object", tool);
    if (const ojson* type = member(tool, "type"); type && *type != "custom")
      throw invalid_request(at + " is a server tool ('" + excerpt_of(*type) +
                                "'): this server runs client tools ({name, description, input_schema}) only",
                            "unsupported_tool");
    ojson function = {{"name", string_member(tool, "name", at)}};
    if (const ojson* description = member(tool, "description")) {
      if (!description->is_string()) throw wrong_value(at + ".description", "a string", *description);
      function["description"] = *description;
    }
    const ojson* schema = member(tool, "input_schema");
    if (!schema || !schema->is_object())
      throw wrong_value(at + ".input_schema", "a JSON schema object", schema ? *schema : ojson());
    function["parameters"] = *schema;
    result.push_back(ojson{{"type", "function"}, {"function", std::move(function)}});
  }
  return result;
}

void add_tool_choice(const ojson& choice, ojson& chat) {
  if (!choice.is_object()) throw wrong_value("tool_choice", "an object", choice);
  const std::string& type = string_member(choice, "type", "tool_choice");
  if (type == "auto" || type == "none")
    chat["tool_choice"] = type;
  else if (type == "any")
    chat["tool_choice"] = "required";
  else if (type == "tool")
    chat["tool_choice"] = {{"type", "function"},
                           {"function", {{"name", string_member(choice, "name", "tool_choice")}}}};
  else
    throw invalid_request("tool_choice.type must be auto, any, tool or none, got '" + type + "'");
  if (const ojson* single = member(choice, "disable_parallel_tool_use"); single && *single == true)
    chat["parallel_tool_calls"] = false;
}

}  // namespace

MessagesRequest translate_messages_request(std::string_view body_text, bool count_only, size_t max_messages) {
  const ojson body = parse_in_client_order(body_text);
  MessagesRequest out;
  ojson chat = ojson::object();
  if (const ojson* model = member(body, "model")) chat["model"] = *model;
  ojson messages = ojson::array();
  if (const ojson* system = member(body, "system"))
    messages.push_back(ojson{{"role", "system"}, {"content", text_blocks(*system, "system")}});
  const ojson* list = member(body, "messages");
  if (!list) throw invalid_request("messages is required");
  if (!list->is_array()) throw wrong_value("messages", "a list of messages", *list);
  if (list->empty()) throw invalid_request("messages must not be empty");
  if (list->size() > max_messages)
    throw invalid_request("messages has " + std::to_string(list->size()) + " entries, more than the " +
                          std::to_string(max_messages) + " a request may carry");
  for (size_t i = 0; i < list->size(); ++i)
    append_message((*list)[i], "messages[" + std::to_string(i) + "]", messages);
  if (messages.empty()) throw invalid_request("messages hold no content this server can render");
  chat["messages"] = std::move(messages);
  if (const ojson* tools = member(body, "tools"); tools && !tools->empty())
    chat["tools"] = chat_tools_of(*tools);
  if (const ojson* choice = member(body, "tool_choice")) add_tool_choice(*choice, chat);
  const ojson* max_tokens = member(body, "max_tokens");
  if (!count_only) {
    if (!max_tokens) throw invalid_request("max_tokens is required");
    if (!max_tokens->is_number_integer() || max_tokens->get<int64_t>() < 1)
      throw wrong_value("max_tokens", "an integer >= 1", *max_tokens);
    chat["max_tokens"] = *max_tokens;
  }
  if (const ojson* stops = member(body, "stop_sequences")) {
    if (!stops->is_array()) throw wrong_value("stop_sequences", "a list of strings", *stops);
    for (const ojson& stop : *stops) {
      if (!stop.is_string()) throw wrong_value("stop_sequences", "a list of strings", *stops);
      out.stops.push_back(stop.get<std::string>());
    }
    if (!stops->empty()) chat["stop"] = *stops;
  }
  for (const char* name : {"temperature", "top_p", "top_k", "seed", "ignore_eos"})
    if (const ojson* value = member(body, name)) chat[name] = *value;
  // Not Anthropic's, but what llama.cpp's server also takes here: the template's own variables,
  // passed on as chat completions take them (and checked there).
  if (const ojson* kwargs = member(body, "chat_template_kwargs")) {
    if (!kwargs->is_object()) throw wrong_value("chat_template_kwargs", "an object", *kwargs);
    chat["chat_template_kwargs"] = *kwargs;
  }
  // Extended thinking: the templates that think take it as enable_thinking.
  if (const ojson* thinking = member(body, "thinking")) {
    if (!thinking->is_object()) throw wrong_value("thinking", "an object", *thinking);
    const std::string& type = string_member(*thinking, "type", "thinking");
    if (type != "enabled" && type != "disabled")
      throw invalid_request("thinking.type must be enabled or disabled, got '" + type + "'");
    chat["chat_template_kwargs"]["enable_thinking"] = type == "enabled";
  }
  if (!count_only)
    if (const ojson* stream = member(body, "stream")) chat["stream"] = *stream;
  out.chat_body = chat.dump(-1, ' ', false, ojson::error_handler_t::replace);
  return out;
}

const char* anthropic_error_type(int status) {
  switch (status) {
    case 400:
    case 405:
    case 411:
    case 431:
      return "invalid_request_error";
    case 401:
      return "authentication_error";
    case 403:
      return "permission_error";
    case 404:
      return "not_found_error";
    case 408:
      return "timeout_error";
    case 413:
      return "request_too_large";
    case 429:
      return "rate_limit_error";
    case 503:
    case 529:
      return "overloaded_error";
    default:
      return status >= 500 ? "api_error" : "invalid_request_error";
  }
}

std::string anthropic_error_json(int status, const std::string& message) {
  const ojson body = {{"type", "error"},
                      {"error", {{"type", anthropic_error_type(status)}, {"message", message}}}};
  return body.dump(-1, ' ', false, ojson::error_handler_t::replace);
}

bool is_messages_path(const std::string& path) {
  return path == "/v1/messages" || path == "/v1/messages/count_tokens";
}

nlohmann::json count_tokens_response(size_t tokens) {
  return {{"input_tokens", tokens}};
}

// The formatter's ReplyBlocks listener: each block is a content block, streamed as Anthropic does.
class MessagesFormatter::Events : public ReplyBlocks::Listener {
 public:
  explicit Events(MessagesFormatter& f) : f_(f) {}
  void opened(size_t index) override {
    ojson start = f_.block(index);
    const ReplyBlock& block = f_.blocks_.blocks()[index];
    if (block.kind == ReplyBlock::Kind::ToolCall) start["input"] = ojson::object();
    if (block.kind == ReplyBlock::Kind::Text) start["text"] = "";
    if (block.kind == ReplyBlock::Kind::Reasoning) start["thinking"] = "";
    send("content_block_start",
         {{"type", "content_block_start"}, {"index", index}, {"content_block", start}});
  }
  void grew(size_t index, const std::string& piece) override {
    ojson delta;
    switch (f_.blocks_.blocks()[index].kind) {
      case ReplyBlock::Kind::Text:
        delta = {{"type", "text_delta"}, {"text", piece}};
        break;
      case ReplyBlock::Kind::Reasoning:
        delta = {{"type", "thinking_delta"}, {"thinking", piece}};
        break;
      case ReplyBlock::Kind::ToolCall:
        delta = {{"type", "input_json_delta"}, {"partial_json", piece}};
        break;
    }
    send("content_block_delta", {{"type", "content_block_delta"}, {"index", index}, {"delta", delta}});
  }
  void closed(size_t index) override {
    send("content_block_stop", {{"type", "content_block_stop"}, {"index", index}});
  }
  void send(const char* name, const ojson& data) {
    if (f_.streaming_) f_.out_ += sse_named(name, data);
  }

 private:
  MessagesFormatter& f_;
};

MessagesFormatter::MessagesFormatter(const ApiRequest& request, MessagesRequest translated,
                                     std::unique_ptr<ReplySplitter> splitter, std::string id, bool streaming)
    : translated_(std::move(translated)),
      splitter_(std::move(splitter)),
      id_(std::move(id)),
      model_(request.model),
      streaming_(streaming),
      prompt_tokens_(static_cast<int64_t>(request.serve.prompt.size())) {}

ojson MessagesFormatter::block(size_t index) const {
  const ReplyBlock& block = blocks_.blocks()[index];
  switch (block.kind) {
    case ReplyBlock::Kind::Text:
      return {{"type", "text"}, {"text", block.text}};
    case ReplyBlock::Kind::Reasoning:
      return {{"type", "thinking"}, {"thinking", block.text}, {"signature", ""}};
    case ReplyBlock::Kind::ToolCall:
      break;
  }
  // The chat output parser releases only calls whose arguments are a JSON object.
  ojson input = ojson::parse(block.text, nullptr, false);
  if (!input.is_object()) input = ojson::object();
  return {{"type", "tool_use"}, {"id", block.call_id}, {"name", block.name}, {"input", std::move(input)}};
}

// Anthropic counts the prompt tokens read from its cache apart from input_tokens.
ojson MessagesFormatter::usage() const {
  return {{"input_tokens", prompt_tokens_ - cached_tokens_},
          {"cache_creation_input_tokens", 0},
          {"cache_read_input_tokens", cached_tokens_},
          {"output_tokens", completion_tokens_}};
}

const char* MessagesFormatter::stop_reason() const {
  if (blocks_.has_tool_calls()) return "tool_use";
  switch (stop_reason_) {
    case StopReason::MaxTokens:
      return "max_tokens";
    case StopReason::StopString:
      return "stop_sequence";
    default:
      return "end_turn";
  }
}

// The stop sequence that ended the reply, as the scheduler's Done event names it.
ojson MessagesFormatter::stop_sequence() const {
  if (stop_reason_ != StopReason::StopString || blocks_.has_tool_calls()) return nullptr;
  return stop_string_;
}

std::string MessagesFormatter::stream_prelude() {
  Events events(*this);
  ojson message = {{"id", id_},
                   {"type", "message"},
                   {"role", "assistant"},
                   {"model", model_},
                   {"content", ojson::array()},
                   {"stop_reason", nullptr},
                   {"stop_sequence", nullptr},
                   {"usage", usage()}};
  events.send("message_start", {{"type", "message_start"}, {"message", std::move(message)}});
  events.send("ping", {{"type", "ping"}});
  return std::exchange(out_, "");
}

void MessagesFormatter::take(const ServeEvent& event) {
  if (finished_) return;
  Events events(*this);
  if (event.kind == ServeEvent::Kind::Error) {
    finished_ = true;
    error_ = event.error.empty() ? "generation failed" : event.error;
    events.send("error", {{"type", "error"}, {"error", {{"type", "api_error"}, {"message", error_}}}});
    return;
  }
  if (!event.text.empty()) blocks_.add(splitter_->feed(event.text), &events);
  if (event.kind != ServeEvent::Kind::Done) return;
  blocks_.add(splitter_->finish(), &events);
  blocks_.close(&events);
  finished_ = true;
  stop_reason_ = event.stop_reason;
  stop_string_ = event.stop_string;
  prompt_tokens_ = event.prompt_tokens;
  cached_tokens_ = event.cached_tokens;
  completion_tokens_ = event.completion_tokens;
  events.send("message_delta",
              {{"type", "message_delta"},
               {"delta", {{"stop_reason", stop_reason()}, {"stop_sequence", stop_sequence()}}},
               {"usage", usage()}});
  events.send("message_stop", {{"type", "message_stop"}});
}

std::string MessagesFormatter::stream_event(const ServeEvent& event) {
  take(event);
  return std::exchange(out_, "");
}

void MessagesFormatter::collect(const ServeEvent& event) {
  take(event);
}

nlohmann::json MessagesFormatter::response() {
  if (!error_.empty()) throw ApiError(500, "server_error", error_);
  if (!finished_) throw ApiError(500, "server_error", "the request ended without a result");
  ojson content = ojson::array();
  for (size_t i = 0; i < blocks_.blocks().size(); ++i) content.push_back(block(i));
  const ojson message = {{"id", id_},
                         {"type", "message"},
                         {"role", "assistant"},
                         {"model", model_},
                         {"content", std::move(content)},
                         {"stop_reason", stop_reason()},
                         {"stop_sequence", stop_sequence()},
                         {"usage", usage()}};
  return nlohmann::json::parse(message.dump(-1, ' ', false, ojson::error_handler_t::replace));
}

}  // namespace mb::server

// SPDX-License-Identifier: MIT
#include "server/responses_api.h"

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

// A message content: a string, or a list of text parts (input_text, output_text, text); one text
// part becomes a string, so that a reply re-sent as an output_text part renders as it was stored.
ojson message_content(const ojson& content, const std::string& where) {
  if (content.is_string()) return content;
  if (!content.is_array()) throw wrong_value(where, "a string or a list of content parts", content);
  ojson parts = ojson::array();
  for (size_t i = 0; i < content.size(); ++i) {
    const ojson& part = content[i];
    const std::string at = where + "[" + std::to_string(i) + "]";
    if (!part.is_object()) throw wrong_value(at, "a content part object", part);
    const std::string& type = string_member(part, "type", at);
    if (type == "input_text" || type == "output_text" || type == "text") {
      parts.push_back(ojson{{"type", "text"}, {"text", string_member(part, "text", at)}});
    } else if (type == "refusal") {
      parts.push_back(ojson{{"type", "text"}, {"text", string_member(part, "refusal", at)}});
    } else {
      throw invalid_request(at + " has type '" + type +
                                "', which this server does not take (the models it serves read text only)",
                            "unsupported_content");
    }
  }
  if (parts.size() == 1) return parts[0]["text"];
  if (parts.empty()) return "";
  return parts;
}

ojson role_message(const std::string& role, ojson content) {
  return ojson{{"role", role}, {"content", std::move(content)}};
}

void append_item(const ojson& item, const std::string& at, ojson& messages) {
  if (!item.is_object()) throw wrong_value(at, "an input item object", item);
  const ojson* type_value = member(item, "type");
  if (type_value && !type_value->is_string()) throw wrong_value(at + ".type", "a string", *type_value);
  const std::string type = type_value ? type_value->get<std::string>() : "message";
  if (type == "message") {
    std::string role = string_member(item, "role", at);
    if (role == "developer") role = "system";  // chat templates know system, not developer
    if (role != "user" && role != "assistant" && role != "system")
      throw invalid_request(at + ".role must be user, assistant, system or developer, got '" + role + "'");
    const ojson* content = member(item, "content");
    if (!content) throw invalid_request(at + ".content is required");
    messages.push_back(role_message(role, message_content(*content, at + ".content")));
  } else if (type == "function_call") {
    ojson call = {
        {"id", string_member(item, "call_id", at)},
        {"type", "function"},
        {"function",
         {{"name", string_member(item, "name", at)}, {"arguments", string_member(item, "arguments", at)}}}};
    // A reply's calls, and the text before them, are one assistant message in chat's form.
    if (messages.empty() || messages.back()["role"] != "assistant") {
      messages.push_back(role_message("assistant", nullptr));
    }
    ojson& assistant = messages.back();
    if (!assistant.contains("tool_calls")) assistant["tool_calls"] = ojson::array();
    assistant["tool_calls"].push_back(std::move(call));
  } else if (type == "function_call_output") {
    const ojson* output = member(item, "output");
    if (!output) throw invalid_request(at + ".output is required");
    ojson message = {{"role", "tool"}, {"tool_call_id", string_member(item, "call_id", at)}};
    message["content"] = message_content(*output, at + ".output");
    messages.push_back(std::move(message));
  } else if (type == "reasoning") {
    // A reply's reasoning, sent back: chat templates leave earlier turns' reasoning out of the
    // prompt, and so does this translation.
  } else {
    throw invalid_request(at + " has type '" + type + "', which this server does not support",
                          "unsupported_item");
  }
}

// Responses' flat function tools ({type, name, description, parameters}) in chat's form.
ojson chat_tools(const ojson& tools) {
  if (!tools.is_array()) throw wrong_value("tools", "a list of tools", tools);
  ojson result = ojson::array();
  for (size_t i = 0; i < tools.size(); ++i) {
    const ojson& tool = tools[i];
    const std::string at = "tools[" + std::to_string(i) + "]";
    if (!tool.is_object()) throw wrong_value(at, "a tool object", tool);
    const std::string& type = string_member(tool, "type", at);
    if (type != "function")
      throw invalid_request(at + " is a '" + type + "' tool: this server runs function tools only",
                            "unsupported_tool");
    ojson function = {{"name", string_member(tool, "name", at)}};
    if (const ojson* description = member(tool, "description")) {
      if (!description->is_string()) throw wrong_value(at + ".description", "a string", *description);
      function["description"] = *description;
    }
    if (const ojson* parameters = member(tool, "parameters")) {
      if (!parameters->is_object())
        throw wrong_value(at + ".parameters", "a JSON schema object", *parameters);
      function["parameters"] = *parameters;
    }
    result.push_back(ojson{{"type", "function"}, {"function", std::move(function)}});
  }
  return result;
}

ojson chat_tool_choice(const ojson& choice) {
  if (choice.is_string()) {
    const std::string& mode = choice.get_ref<const std::string&>();
    if (mode == "auto" || mode == "none" || mode == "required") return choice;
    throw invalid_request("tool_choice must be auto, none, required or a function, got '" + mode + "'");
  }
  if (choice.is_object() && choice.contains("type") && choice["type"] == "function")
    return ojson{{"type", "function"},
                 {"function", {{"name", string_member(choice, "name", "tool_choice")}}}};
  throw wrong_value("tool_choice", "auto, none, required or {\"type\": \"function\", \"name\": ...}", choice);
}

// text.format in chat's response_format.
std::optional<ojson> chat_response_format(const ojson& text) {
  if (!text.is_object()) throw wrong_value("text", "an object", text);
  const ojson* format = member(text, "format");
  if (!format) return std::nullopt;
  if (!format->is_object()) throw wrong_value("text.format", "an object", *format);
  const std::string& type = string_member(*format, "type", "text.format");
  if (type == "text") return std::nullopt;
  if (type == "json_object") return ojson{{"type", "json_object"}};
  if (type != "json_schema")
    throw invalid_request("text.format.type must be text, json_object or json_schema");
  const ojson* name = member(*format, "name");
  if (name && !name->is_string()) throw wrong_value("text.format.name", "a string", *name);
  ojson schema = {{"name", name ? *name : ojson("response")}};
  if (const ojson* s = member(*format, "schema")) schema["schema"] = *s;
  if (const ojson* strict = member(*format, "strict")) schema["strict"] = *strict;
  return ojson{{"type", "json_schema"}, {"json_schema", std::move(schema)}};
}

void refuse_unsupported_fields(const ojson& body) {
  if (const ojson* background = member(body, "background"); background && *background == true)
    throw invalid_request("background is not supported (responses are answered while the client waits)");
  for (const char* name : {"conversation", "prompt"})
    if (member(body, name))
      throw invalid_request(std::string(name) + " is not supported (this server keeps no stored " + name +
                            "s; send the input, or previous_response_id)");
}

}  // namespace

void append_response_items(const ojson& items, ojson& messages, size_t max_items) {
  if (!items.is_array()) throw wrong_value("input", "a string or a list of items", items);
  if (items.size() > max_items)
    throw invalid_request("input has " + std::to_string(items.size()) + " items, more than the " +
                          std::to_string(max_items) + " a request may carry");
  for (size_t i = 0; i < items.size(); ++i)
    append_item(items[i], "input[" + std::to_string(i) + "]", messages);
}

ResponsesRequest translate_responses_request(std::string_view body_text, ResponseStore* store,
                                             size_t max_items) {
  const ojson body = parse_in_client_order(body_text);
  refuse_unsupported_fields(body);
  ResponsesRequest out;
  ojson& echo = out.echo;
  echo = ojson::object();

  std::string previous;
  if (const ojson* value = member(body, "previous_response_id")) {
    if (!value->is_string()) throw wrong_value("previous_response_id", "a string", *value);
    previous = value->get<std::string>();
    std::optional<ojson> kept = store ? store->get(previous) : std::nullopt;
    if (!kept)
      throw ApiError(400, "invalid_request_error", "Previous response with id '" + previous + "' not found.",
                     "previous_response_not_found");
    out.conversation = std::move(*kept);
  } else {
    out.conversation = ojson::array();
  }
  const ojson* input = member(body, "input");
  if (!input) throw invalid_request("input is required");
  if (input->is_string())
    out.conversation.push_back(role_message("user", *input));
  else
    append_response_items(*input, out.conversation, max_items);

  ojson messages = ojson::array();
  std::optional<std::string> instructions;
  if (const ojson* value = member(body, "instructions")) {
    if (!value->is_string()) throw wrong_value("instructions", "a string", *value);
    instructions = value->get<std::string>();
    messages.push_back(role_message("system", *value));
  }
  for (const ojson& message : out.conversation) messages.push_back(message);

  ojson chat = ojson::object();
  if (const ojson* model = member(body, "model")) chat["model"] = *model;
  chat["messages"] = std::move(messages);
  if (const ojson* tools = member(body, "tools"); tools && !tools->empty())
    chat["tools"] = chat_tools(*tools);
  if (const ojson* choice = member(body, "tool_choice")) chat["tool_choice"] = chat_tool_choice(*choice);
  if (const ojson* parallel = member(body, "parallel_tool_calls")) chat["parallel_tool_calls"] = *parallel;
  if (const ojson* text = member(body, "text"))
    if (auto format = chat_response_format(*text)) chat["response_format"] = std::move(*format);
  if (const ojson* max = member(body, "max_output_tokens")) chat["max_tokens"] = *max;
  for (const char* name : {"temperature", "top_p", "top_k", "min_p", "seed", "ignore_eos", "stream"})
    if (const ojson* value = member(body, name)) chat[name] = *value;
  if (const ojson* kwargs = member(body, "chat_template_kwargs")) chat["chat_template_kwargs"] = *kwargs;
  out.chat_body = chat.dump(-1, ' ', false, ojson::error_handler_t::replace);

  if (const ojson* value = member(body, "store")) {
    if (!value->is_boolean()) throw wrong_value("store", "true or false", *value);
    out.store = value->get<bool>();
  }
  echo["instructions"] = instructions ? ojson(*instructions) : ojson(nullptr);
  echo["max_output_tokens"] = body.value("max_output_tokens", ojson(nullptr));
  echo["parallel_tool_calls"] = body.value("parallel_tool_calls", ojson(true));
  echo["previous_response_id"] = previous.empty() ? ojson(nullptr) : ojson(previous);
  echo["store"] = out.store;
  echo["temperature"] = body.value("temperature", ojson(1.0));
  echo["top_p"] = body.value("top_p", ojson(1.0));
  echo["tool_choice"] = body.value("tool_choice", ojson("auto"));
  echo["tools"] = body.value("tools", ojson::array());
  echo["text"] = body.value("text", ojson{{"format", {{"type", "text"}}}});
  echo["metadata"] = body.value("metadata", ojson::object());
  return out;
}

ResponseStore::ResponseStore(size_t max_entries, size_t max_bytes)
    : max_entries_(max_entries), max_bytes_(max_bytes) {}

void ResponseStore::put(const std::string& id, const ojson& messages) {
  std::string text = messages.dump(-1, ' ', false, ojson::error_handler_t::replace);
  std::lock_guard lock(mutex_);
  if (auto it = index_.find(id); it != index_.end()) {
    bytes_ -= it->second->second.size();
    entries_.erase(it->second);
    index_.erase(it);
  }
  if (text.size() > max_bytes_ || max_entries_ == 0) return;
  bytes_ += text.size();
  entries_.emplace_front(id, std::move(text));
  index_[id] = entries_.begin();
  while (entries_.size() > max_entries_ || bytes_ > max_bytes_) {
    bytes_ -= entries_.back().second.size();
    index_.erase(entries_.back().first);
    entries_.pop_back();
  }
}

std::optional<ojson> ResponseStore::get(const std::string& id) {
  std::lock_guard lock(mutex_);
  const auto it = index_.find(id);
  if (it == index_.end()) return std::nullopt;
  entries_.splice(entries_.begin(), entries_, it->second);
  return ojson::parse(it->second->second);
}

size_t ResponseStore::size() const {
  std::lock_guard lock(mutex_);
  return entries_.size();
}

// The formatter's ReplyBlocks listener: each block is an output item, streamed as OpenAI does.
class ResponsesFormatter::Events : public ReplyBlocks::Listener {
 public:
  explicit Events(ResponsesFormatter& f) : f_(f) {}
  void opened(size_t index) override {
    f_.emit("response.output_item.added", {{"output_index", index}, {"item", f_.item(index, false)}});
    if (kind(index) == ReplyBlock::Kind::Text)
      f_.emit("response.content_part.added", {{"item_id", item_id(index)},
                                              {"output_index", index},
                                              {"content_index", 0},
                                              {"part", text_part("")}});
  }
  void grew(size_t index, const std::string& piece) override {
    const ReplyBlock::Kind k = kind(index);
    if (k == ReplyBlock::Kind::ToolCall) {
      f_.emit("response.function_call_arguments.delta",
              {{"item_id", item_id(index)}, {"output_index", index}, {"delta", piece}});
      return;
    }
    f_.emit(k == ReplyBlock::Kind::Text ? "response.output_text.delta" : "response.reasoning_text.delta",
            {{"item_id", item_id(index)}, {"output_index", index}, {"content_index", 0}, {"delta", piece}});
  }
  void closed(size_t index) override {
    const ReplyBlock& block = f_.blocks_.blocks()[index];
    if (block.kind == ReplyBlock::Kind::ToolCall) {
      f_.emit("response.function_call_arguments.done", {{"item_id", item_id(index)},
                                                        {"output_index", index},
                                                        {"name", block.name},
                                                        {"arguments", block.text}});
    } else if (block.kind == ReplyBlock::Kind::Text) {
      f_.emit(
          "response.output_text.done",
          {{"item_id", item_id(index)}, {"output_index", index}, {"content_index", 0}, {"text", block.text}});
      f_.emit("response.content_part.done", {{"item_id", item_id(index)},
                                             {"output_index", index},
                                             {"content_index", 0},
                                             {"part", text_part(block.text)}});
    } else {
      f_.emit(
          "response.reasoning_text.done",
          {{"item_id", item_id(index)}, {"output_index", index}, {"content_index", 0}, {"text", block.text}});
    }
    f_.emit("response.output_item.done", {{"output_index", index}, {"item", f_.item(index, true)}});
  }
  static ojson text_part(const std::string& text) {
    return {{"type", "output_text"},
            {"text", text},
            {"annotations", ojson::array()},
            {"logprobs", ojson::array()}};
  }

 private:
  ReplyBlock::Kind kind(size_t index) const { return f_.blocks_.blocks()[index].kind; }
  std::string item_id(size_t index) const { return f_.item(index, false)["id"]; }
  ResponsesFormatter& f_;
};

ResponsesFormatter::ResponsesFormatter(const ApiRequest& request, ResponsesRequest translated,
                                       ResponseStore* store, std::unique_ptr<ReplySplitter> splitter,
                                       std::string id, uint64_t random, int64_t created, bool streaming)
    : translated_(std::move(translated)),
      store_(store),
      splitter_(std::move(splitter)),
      id_(std::move(id)),
      model_(request.model),
      random_(random),
      created_(created),
      streaming_(streaming) {}

void ResponsesFormatter::emit(const char* type, ojson fields) {
  if (!streaming_) return;
  ojson event = {{"type", type}, {"sequence_number", sequence_++}};
  for (auto& [key, value] : fields.items()) event[key] = std::move(value);
  out_ += sse_named(type, event);
}

ojson ResponsesFormatter::item(size_t index, bool done) const {
  const ReplyBlock& block = blocks_.blocks()[index];
  const char* status = done ? "completed" : "in_progress";
  switch (block.kind) {
    case ReplyBlock::Kind::Text:
      return {{"id", prefixed_id("msg_", random_, index)},
              {"type", "message"},
              {"status", status},
              {"role", "assistant"},
              {"content", done ? ojson::array({Events::text_part(block.text)}) : ojson::array()}};
    case ReplyBlock::Kind::ToolCall:
      return {{"id", prefixed_id("fc_", random_, index)},
              {"type", "function_call"},
              {"status", status},
              {"call_id", block.call_id},
              {"name", block.name},
              {"arguments", done ? block.text : ""}};
    case ReplyBlock::Kind::Reasoning:
      break;
  }
  ojson content = ojson::array();
  if (done) content.push_back({{"type", "reasoning_text"}, {"text", block.text}});
  return {{"id", prefixed_id("rs_", random_, index)},
          {"type", "reasoning"},
          {"summary", ojson::array()},
          {"content", std::move(content)}};
}

ojson ResponsesFormatter::object(const char* status) const {
  ojson output = ojson::array();
  const bool done = std::string(status) != "in_progress";
  if (done)
    for (size_t i = 0; i < blocks_.blocks().size(); ++i) output.push_back(item(i, true));
  ojson response = {{"id", id_},        {"object", "response"},       {"created_at", created_},
                    {"status", status}, {"error", nullptr},           {"incomplete_details", nullptr},
                    {"model", model_},  {"output", std::move(output)}};
  if (std::string(status) == "incomplete") response["incomplete_details"] = {{"reason", "max_output_tokens"}};
  if (!error_.empty()) response["error"] = {{"code", "server_error"}, {"message", error_}};
  for (const auto& [key, value] : translated_.echo.items()) response[key] = value;
  if (done && error_.empty())
    response["usage"] = {{"input_tokens", prompt_tokens_},
                         {"input_tokens_details", {{"cached_tokens", cached_tokens_}}},
                         {"output_tokens", completion_tokens_},
                         {"output_tokens_details", {{"reasoning_tokens", 0}}},
                         {"total_tokens", prompt_tokens_ + completion_tokens_}};
  else
    response["usage"] = nullptr;
  return response;
}

std::string ResponsesFormatter::stream_prelude() {
  emit("response.created", {{"response", object("in_progress")}});
  emit("response.in_progress", {{"response", object("in_progress")}});
  return std::exchange(out_, "");
}

void ResponsesFormatter::take(const ServeEvent& event) {
  if (finished_) return;
  Events events(*this);
  if (event.kind == ServeEvent::Kind::Error) {
    finished_ = true;
    error_ = event.error.empty() ? "generation failed" : event.error;
    emit("response.failed", {{"response", object("failed")}});
    return;
  }
  if (!event.text.empty()) blocks_.add(splitter_->feed(event.text), &events);
  if (event.kind != ServeEvent::Kind::Done) return;
  blocks_.add(splitter_->finish(), &events);
  blocks_.close(&events);
  finished_ = true;
  stop_reason_ = event.stop_reason;
  prompt_tokens_ = event.prompt_tokens;
  cached_tokens_ = event.cached_tokens;
  completion_tokens_ = event.completion_tokens;
  const bool incomplete = stop_reason_ == StopReason::MaxTokens;
  const ojson final_object = object(incomplete ? "incomplete" : "completed");
  if (translated_.store && store_) {
    // The conversation a follow-up continues: the input, then this reply's output items read
    // back as input, which is how a client that keeps its own history would send them.
    ojson conversation = translated_.conversation;
    append_response_items(final_object["output"], conversation, SIZE_MAX);
    store_->put(id_, conversation);
  }
  emit(incomplete ? "response.incomplete" : "response.completed", {{"response", final_object}});
}

std::string ResponsesFormatter::stream_event(const ServeEvent& event) {
  take(event);
  return std::exchange(out_, "");
}

void ResponsesFormatter::collect(const ServeEvent& event) {
  take(event);
}

nlohmann::json ResponsesFormatter::response() {
  if (!error_.empty()) throw ApiError(500, "server_error", error_);
  if (!finished_) throw ApiError(500, "server_error", "the request ended without a result");
  return nlohmann::json::parse(object(stop_reason_ == StopReason::MaxTokens ? "incomplete" : "completed")
                                   .dump(-1, ' ', false, ojson::error_handler_t::replace));
}

}  // namespace mb::server

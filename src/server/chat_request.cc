// SPDX-License-Identifier: MIT
#include "server/chat_request.h"

#include <algorithm>
#include <array>
#include <cstdint>
#include <map>
#include <optional>

#include "core/json_text.h"
#include "server/openai_api.h"

namespace mb::server {

using nlohmann::json;

namespace {

// The field's value, or null when absent: OpenAI treats an explicit null as "not given".
const json* field(const json& object, const char* name) {
  const auto it = object.find(name);
  if (it == object.end() || it->is_null()) return nullptr;
  return &*it;
}

ApiError wrong_type(const std::string& name, const char* expected, const json& value) {
  return invalid_request(name + " must be " + expected + ", got " + json_excerpt(value));
}

void check_string_field(const json& message, const char* name, const std::string& where) {
  if (const json* value = field(message, name); value && !value->is_string())
    throw wrong_type(where + "." + name, "a string", *value);
}

// A content given as parts must hold text parts only: the models this server runs read no
// images or audio, and a part the template would skip must not vanish from the prompt unnoticed.
void check_content_parts(const json& parts, const std::string& where) {
  for (size_t j = 0; j < parts.size(); ++j) {
    const json& part = parts[j];
    const std::string at = where + "[" + std::to_string(j) + "]";
    const json* type = part.is_object() ? field(part, "type") : nullptr;
    if (type && *type == "text") {
      const json* text = field(part, "text");
      if (!text || !text->is_string())
        throw invalid_request(at + ".text must be a string, got " + (text ? json_excerpt(*text) : "nothing"));
      continue;
    }
    const std::string kind = type && type->is_string() ? type->get<std::string>() : "";
    if (kind == "image_url" || kind == "image" || kind == "input_image")
      throw invalid_request(at + " is an image (\"" + kind +
                            "\" part): the models this server runs read text only, so only "
                            "{\"type\": \"text\", \"text\": ...} parts are supported");
    throw invalid_request(at + ": only {\"type\": \"text\", \"text\": ...} parts are supported, got " +
                          json_excerpt(part));
  }
}

void check_tool_calls(const json& calls, const std::string& where) {
  if (!calls.is_array()) throw wrong_type(where, "a list of tool calls", calls);
  for (size_t j = 0; j < calls.size(); ++j) {
    const std::string at = where + "[" + std::to_string(j) + "]";
    if (!calls[j].is_object()) throw wrong_type(at, "an object", calls[j]);
    const json* function = field(calls[j], "function");
    if (!function) continue;
    if (!function->is_object()) throw wrong_type(at + ".function", "an object", *function);
    check_string_field(*function, "name", at + ".function");
    // OpenAI sends the arguments as JSON text; transformers' templates take a mapping as well.
    if (const json* arguments = field(*function, "arguments");
        arguments && !arguments->is_string() && !arguments->is_object())
      throw wrong_type(at + ".function.arguments", "a string or an object", *arguments);
  }
}

void check_message(const json& message, size_t index) {
  const std::string where = "messages[" + std::to_string(index) + "]";
  if (!message.is_object()) throw wrong_type(where, "an object", message);
  const auto role = message.find("role");
  if (role == message.end() || !role->is_string() || role->get_ref<const std::string&>().empty())
    throw invalid_request(where + ".role must be a non-empty string");
  if (const json* content = field(message, "content")) {
    if (content->is_array())
      check_content_parts(*content, where + ".content");
    else if (!content->is_string())
      throw wrong_type(where + ".content", "a string, null or a list of text parts", *content);
  }
  if (const json* calls = field(message, "tool_calls")) check_tool_calls(*calls, where + ".tool_calls");
  check_string_field(message, "tool_call_id", where);
  check_string_field(message, "name", where);
}

void check_tools(const json& body) {
  if (const json* tools = field(body, "tools")) {
    if (!tools->is_array()) throw wrong_type("tools", "a list of tool definitions", *tools);
    for (size_t j = 0; j < tools->size(); ++j)
      if (!(*tools)[j].is_object())
        throw wrong_type("tools[" + std::to_string(j) + "]", "an object (a tool definition)", (*tools)[j]);
  }
  // tool_choice and parallel_tool_calls are read with the reply's options (chat_tools.cc).
  if (const json* kwargs = field(body, "chat_template_kwargs")) {
    if (!kwargs->is_object())
      throw wrong_type("chat_template_kwargs",
                       "an object of template variables such as {\"enable_thinking\": false}", *kwargs);
    if (kwargs->contains("messages"))
      throw invalid_request("chat_template_kwargs cannot set messages: they are the request's messages");
    if (kwargs->contains("tools"))
      throw invalid_request("chat_template_kwargs cannot set tools: give them as the request's tools");
  }
}

// A SAX handler that writes the values of the body the template takes back as JSON text in the
// order they were read, and notes where they lie in that text: the last "messages", "tools" and
// "chat_template_kwargs" of the body (a repeated key keeps its last value, as in the parsed body),
// and in each message of the last "messages", the last "content" and the last arguments of each
// tool call. Strings are re-escaped and floats keep their own digits, so what the template's JSON
// reader sees is what the client sent, value for value.
class BodyRewriter {
 public:
  using string_t = json::string_t;

  struct Span {
    size_t begin = 0, end = 0;
  };
  enum Target { kNone, kMessages, kTools, kKeywordArguments, kInner };
  // A value inside a message: its index, and the tool call's index for arguments (kContent for the
  // content).
  using InnerKey = std::pair<size_t, size_t>;
  static constexpr size_t kContent = SIZE_MAX;

  std::string out;
  std::array<std::optional<Span>, 4> top;  // indexed by Target: messages, tools, keyword arguments
  std::map<InnerKey, Span> inner;          // contents and tool-call arguments of the last "messages"

  bool null() { return scalar("null"); }
  bool boolean(bool value) { return scalar(value ? "true" : "false"); }
  bool number_integer(json::number_integer_t value) { return scalar(std::to_string(value)); }
  bool number_unsigned(json::number_unsigned_t value) { return scalar(std::to_string(value)); }
  bool number_float(json::number_float_t, const string_t& text) { return scalar(text); }
  bool string(string_t& value) { return scalar(json(value).dump()); }
  bool binary(json::binary_t&) { return false; }

  bool start_object(size_t) { return open(true, "{"); }
  bool start_array(size_t) { return open(false, "["); }
  bool end_object() { return close("}"); }
  bool end_array() { return close("]"); }

  bool key(string_t& key) {
    Frame& frame = open_.back();
    if (frame.count++ > 0) emit(", ");
    emit(json(key).dump() + ": ");
    frame.key = std::move(key);
    return true;
  }

  bool parse_error(size_t, const std::string&, const nlohmann::detail::exception&) { return false; }

 private:
  struct Frame {
    bool object = false;
    size_t count = 0;  // values (arrays) or keys (objects) written so far
    std::string key;   // an object's key read last
    size_t begin = 0;  // where the container starts in `out`
    Target target = kNone;
    InnerKey inner;  // for kInner
  };

  // Whether open_[depth] is an object whose current key is `key` (an array when key is null).
  bool at(size_t depth, const char* key) const {
    const Frame& frame = open_[depth];
    return key ? frame.object && frame.key == key : !frame.object;
  }

  // What the value about to be written is; writes an array's separator first.
  std::pair<Target, InnerKey> begin_value() {
    if (open_.empty()) return {kNone, {}};
    Frame& parent = open_.back();
    if (!parent.object && parent.count++ > 0) emit(", ");
    if (open_.size() == 1 && parent.object) {
      if (parent.key == "messages") return {kMessages, {}};
      if (parent.key == "tools") return {kTools, {}};
      if (parent.key == "chat_template_kwargs") return {kKeywordArguments, {}};
      return {kNone, {}};
    }
    if (open_.size() < 3 || !at(0, "messages") || !at(1, nullptr)) return {kNone, {}};
    const size_t message = open_[1].count - 1;
    if (open_.size() == 3 && at(2, "content")) return {kInner, {message, kContent}};
    // messages[i].tool_calls[j].function.arguments
    if (open_.size() == 6 && at(2, "tool_calls") && at(3, nullptr) && at(4, "function") && at(5, "arguments"))
      return {kInner, {message, open_[3].count - 1}};
    return {kNone, {}};
  }

  void record(Target target, const InnerKey& key, size_t begin) {
    const Span span{begin, out.size()};
    if (target == kInner)
      inner[key] = span;
    else if (target != kNone)
      top[target] = span;
  }

  bool scalar(const std::string& text) {
    const auto [target, key] = begin_value();
    const size_t begin = out.size();
    // A top-level value is written even when it is a scalar (a null "tools", say).
    if (capture_ > 0 || (target != kNone && target != kInner)) out += text;
    record(target, key, begin);
    return true;
  }

  bool open(bool object, const char* bracket) {
    const auto [target, key] = begin_value();
    // A repeated "messages" replaces the earlier one, contents and all.
    if (target == kMessages) inner.clear();
    Frame& frame = open_.emplace_back();
    frame.object = object;
    frame.begin = out.size();
    frame.target = target;
    frame.inner = key;
    if (capture_ > 0)
      ++capture_;
    else if (target != kNone)
      capture_ = 1;
    emit(bracket);
    return true;
  }

  bool close(const char* bracket) {
    emit(bracket);
    if (capture_ > 0) --capture_;
    const Frame frame = std::move(open_.back());
    open_.pop_back();
    record(frame.target, frame.inner, frame.begin);
    return true;
  }

  // Only the values the template takes are written: the rest of the body may be large.
  void emit(const std::string& text) {
    if (capture_ > 0) out += text;
  }

  std::vector<Frame> open_;
  int capture_ = 0;  // open containers of the top-level value being written (0: none)
};

// The texts of a list of text parts, joined with "\n" between them once the text is not empty.
std::string joined_text(const json& parts) {
  std::string text;
  for (const json& part : parts) {
    if (!text.empty()) text += '\n';
    text += part.at("text").get_ref<const std::string&>();
  }
  return text;
}

// Tool-call arguments sent as the text of a JSON object (OpenAI's form): that text, for templates
// that read arguments as a mapping; nothing for any other value.
std::optional<std::string> arguments_object_text(const json& call) {
  const json* function = field(call, "function");
  const json* arguments = function ? field(*function, "arguments") : nullptr;
  if (!arguments || !arguments->is_string()) return std::nullopt;
  const std::string& text = arguments->get_ref<const std::string&>();
  try {
    // Within the depth the template's values allow below messages[i].tool_calls[j].function.
    if (parse_json_text(text, "arguments", 32, nullptr, size_t{1} << 17).is_object()) return text;
  } catch (const Error&) {
  }
  return std::nullopt;
}

}  // namespace

ChatVariables read_chat_variables(std::string_view body_text, const json& body, size_t max_messages) {
  const json* messages = field(body, "messages");
  if (!messages) throw invalid_request("messages is required");
  if (!messages->is_array()) throw wrong_type("messages", "a list of messages", *messages);
  if (messages->empty()) throw invalid_request("messages must not be empty");
  if (messages->size() > max_messages)
    throw invalid_request("messages holds " + std::to_string(messages->size()) + " messages, more than " +
                          std::to_string(max_messages));
  for (size_t i = 0; i < messages->size(); ++i) check_message((*messages)[i], i);
  check_tools(body);

  // The body already parsed once, within the limits on its size and nesting; this reading only
  // recovers the key order.
  BodyRewriter rewriter;
  bool read = false;
  try {
    read = json::sax_parse(body_text, &rewriter);
  } catch (const json::exception&) {
  }
  if (!read || !rewriter.top[BodyRewriter::kMessages])
    throw invalid_request("the request body could not be read again as JSON", "invalid_json");
  const auto text_of = [&](BodyRewriter::Target target) {
    const BodyRewriter::Span& span = *rewriter.top[target];
    return rewriter.out.substr(span.begin, span.end - span.begin);
  };
  ChatVariables variables;
  variables.messages = text_of(BodyRewriter::kMessages);
  const size_t offset = rewriter.top[BodyRewriter::kMessages]->begin;
  const auto rewrite = [&](ChatVariables::Rewrite::Kind kind, BodyRewriter::InnerKey key, std::string text) {
    const auto span = rewriter.inner.find(key);
    if (span == rewriter.inner.end()) return;  // cannot happen: the parsed value was read here
    variables.rewrites.push_back(
        {kind, span->second.begin - offset, span->second.end - offset, std::move(text)});
  };
  for (size_t i = 0; i < messages->size(); ++i) {
    const json& message = (*messages)[i];
    if (const json* content = field(message, "content"); content && content->is_array())
      rewrite(ChatVariables::Rewrite::kListContent, {i, BodyRewriter::kContent},
              json(joined_text(*content)).dump());
    if (const json* calls = field(message, "tool_calls"))
      for (size_t j = 0; j < calls->size(); ++j)
        if (std::optional<std::string> object = arguments_object_text((*calls)[j]))
          rewrite(ChatVariables::Rewrite::kStringArguments, {i, j}, std::move(*object));
  }
  std::sort(variables.rewrites.begin(), variables.rewrites.end(),
            [](const auto& a, const auto& b) { return a.begin < b.begin; });
  if (field(body, "tools")) variables.tools = text_of(BodyRewriter::kTools);
  if (field(body, "chat_template_kwargs")) {
    const std::string object = text_of(BodyRewriter::kKeywordArguments);
    variables.keyword_arguments = object.substr(1, object.size() - 2);
  }
  return variables;
}

std::string ChatVariables::to_json(const TemplateReading& reading) const {
  std::string text = "{\"messages\": ";
  size_t at = 0;
  for (const Rewrite& rewrite : rewrites) {
    const bool apply =
        rewrite.kind == Rewrite::kListContent ? !reading.content_parts : !reading.string_arguments;
    if (!apply) continue;
    text.append(messages, at, rewrite.begin - at);
    text += rewrite.text;
    at = rewrite.end;
  }
  text.append(messages, at);
  if (!tools.empty()) text += ", \"tools\": " + tools;
  if (!keyword_arguments.empty()) text += ", " + keyword_arguments;
  return text + "}";
}

namespace {

// Renders a probe, or nothing when the template refuses it.
std::optional<std::string> render_probe(const ChatTemplate& chat_template, std::string_view variables,
                                        const ChatRenderOptions& options) {
  try {
    return chat_template.render_json(variables, options);
  } catch (const Error&) {
    return std::nullopt;
  }
}

// A conversation whose assistant calls a tool with `arguments`.
std::string tool_call_probe(std::string_view arguments) {
  return R"({"messages": [{"role": "user", "content": "mambacpp-question"}, {"role": "assistant", "content": "", )"
         R"("tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "mambacpp_tool", "arguments": )" +
         std::string(arguments) +
         R"(}}]}, {"role": "tool", "tool_call_id": "call_1", "content": "mambacpp-result"}]})";
}

}  // namespace

TemplateReading probe_template(const ChatTemplate& chat_template, const ChatRenderOptions& options) {
  TemplateReading reading;
  const std::optional<std::string> parts = render_probe(
      chat_template,
      R"({"messages": [{"role": "user", "content": [{"type": "text", "text": "mambacpp-part-one"},)"
      R"( {"type": "text", "text": "mambacpp-part-two"}]}]})",
      options);
  const auto has = [](const std::optional<std::string>& text, std::string_view s) {
    return text && text->find(s) != std::string::npos;
  };
  // Both texts, and not quoted as in a list's repr or its JSON.
  reading.content_parts = has(parts, "mambacpp-part-one") && has(parts, "mambacpp-part-two") &&
                          !has(parts, "'mambacpp-part-one'") && !has(parts, "\"mambacpp-part-one\"");
  // Arguments as JSON text are kept for every template that does not fail on them where it takes
  // a mapping.
  const bool text_fails =
      !render_probe(chat_template, tool_call_probe(R"("{\"mambacpp-arg\": 1}")"), options);
  const std::optional<std::string> object =
      render_probe(chat_template, tool_call_probe(R"({"mambacpp-arg": 1})"), options);
  reading.string_arguments = !(text_fails && has(object, "mambacpp-arg"));
  return reading;
}

}  // namespace mb::server

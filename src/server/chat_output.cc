// SPDX-License-Identifier: MIT
#include "server/chat_output.h"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <random>

namespace mb::server {

namespace {

using ordered_json = nlohmann::ordered_json;

// The markers of each format's call block: what opens and closes one in the generated text.
struct CallMarkers {
  std::string_view open, close;
};
CallMarkers call_markers(ToolCallFormat format) {
  switch (format) {
    case ToolCallFormat::JsonInToolCallTags:
    case ToolCallFormat::XmlFunction:
      return {"<tool_call>", "</tool_call>"};
    case ToolCallFormat::ToolCallList:
      return {"<TOOLCALL>", "</TOOLCALL>"};
    case ToolCallFormat::None:
      break;
  }
  return {};
}

bool is_space(char c) {
  return c == ' ' || c == '\n' || c == '\r' || c == '\t';
}

std::string_view trim(std::string_view text) {
  while (!text.empty() && is_space(text.front())) text.remove_prefix(1);
  while (!text.empty() && is_space(text.back())) text.remove_suffix(1);
  return text;
}

// The length of the longest end of `text` that is a proper start of `marker`: those bytes may
// become the marker with the next piece, so they are held back.
size_t partial_marker_suffix(std::string_view text, std::string_view marker) {
  size_t longest = std::min(text.size(), marker.size() - 1);
  for (size_t n = longest; n > 0; --n) {
    if (text.substr(text.size() - n) == marker.substr(0, n)) return n;
  }
  return 0;
}

// A JSON value parsed without exceptions; nullopt when the text is not one complete value. The
// ordered form keeps the model's key order, which the arguments' text reports as the model wrote it.
std::optional<ordered_json> parse_json(std::string_view text) {
  ordered_json value = ordered_json::parse(text.begin(), text.end(), nullptr, false);
  if (value.is_discarded()) return std::nullopt;
  return value;
}

bool known_name(const ChatParseOptions& options, const std::string& name) {
  return std::find(options.tool_names.begin(), options.tool_names.end(), name) != options.tool_names.end();
}

// {"name": ..., "arguments": {...}} (or "parameters", which some fine-tunes write, as llama.cpp
// accepts; arguments given as a string holding a JSON object are taken too).
std::optional<std::pair<std::string, std::string>> json_call(const ordered_json& value,
                                                             const ChatParseOptions& options) {
  if (!value.is_object()) return std::nullopt;
  auto name = value.find("name");
  if (name == value.end() || !name->is_string()) return std::nullopt;
  auto args = value.find("arguments");
  if (args == value.end()) args = value.find("parameters");
  ordered_json arguments = ordered_json::object();
  if (args != value.end()) {
    arguments = *args;
    if (arguments.is_string()) {
      auto inner = parse_json(arguments.get_ref<const std::string&>());
      if (!inner) return std::nullopt;
      arguments = std::move(*inner);
    }
  }
  if (!arguments.is_object()) return std::nullopt;
  std::string function = name->get<std::string>();
  if (!known_name(options, function)) return std::nullopt;
  return std::make_pair(function, arguments.dump());
}

// Removes `prefix` from the front of `text`; false when it is not there.
bool consume(std::string_view& text, std::string_view prefix) {
  if (text.substr(0, prefix.size()) != prefix) return false;
  text.remove_prefix(prefix.size());
  return true;
}

// A parameter's value as the XML form writes it: between a newline after its tag and one before
// its end tag. A value that is valid JSON is that value (numbers, booleans, objects), anything
// else a string, as llama.cpp's Qwen3-Coder parser does.
ordered_json xml_parameter_value(std::string_view text) {
  if (!text.empty() && text.front() == '\n') text.remove_prefix(1);
  if (!text.empty() && text.back() == '\n') text.remove_suffix(1);
  if (auto value = parse_json(text)) return *value;
  return std::string(text);
}

// One or more <function=NAME><parameter=P>value</parameter>...</function> blocks.
std::optional<std::vector<std::pair<std::string, std::string>>> xml_calls(std::string_view body,
                                                                          const ChatParseOptions& options) {
  std::vector<std::pair<std::string, std::string>> calls;
  body = trim(body);
  while (!body.empty()) {
    if (!consume(body, "<function=")) return std::nullopt;
    size_t end = body.find('>');
    if (end == std::string_view::npos) return std::nullopt;
    std::string name(trim(body.substr(0, end)));
    body.remove_prefix(end + 1);
    if (!known_name(options, name)) return std::nullopt;
    ordered_json arguments = ordered_json::object();
    for (;;) {
      body = trim(body);
      if (consume(body, "</function>")) break;
      if (!consume(body, "<parameter=")) return std::nullopt;
      size_t name_end = body.find('>');
      if (name_end == std::string_view::npos) return std::nullopt;
      std::string parameter(trim(body.substr(0, name_end)));
      body.remove_prefix(name_end + 1);
      size_t value_end = body.find("</parameter>");
      if (parameter.empty() || value_end == std::string_view::npos) return std::nullopt;
      arguments[parameter] = xml_parameter_value(body.substr(0, value_end));
      body.remove_prefix(value_end + std::string_view("</parameter>").size());
    }
    calls.emplace_back(std::move(name), arguments.dump());
    body = trim(body);
  }
  if (calls.empty()) return std::nullopt;
  return calls;
}

// The calls of one complete block's body (the text between its markers), or nullopt when it is
// not a valid call: then the whole block is text.
std::optional<std::vector<std::pair<std::string, std::string>>> parse_call_block(
    ToolCallFormat format, std::string_view body, const ChatParseOptions& options) {
  std::vector<std::pair<std::string, std::string>> calls;
  if (format == ToolCallFormat::XmlFunction) return xml_calls(body, options);
  auto value = parse_json(trim(body));
  if (!value) return std::nullopt;
  if (format == ToolCallFormat::ToolCallList) {
    if (!value->is_array() || value->empty()) return std::nullopt;
    for (const auto& item : *value) {
      auto call = json_call(item, options);
      if (!call) return std::nullopt;
      calls.push_back(std::move(*call));
    }
    return calls;
  }
  auto call = json_call(*value, options);
  if (!call) return std::nullopt;
  calls.push_back(std::move(*call));
  return calls;
}

}  // namespace

const char* tool_call_format_name(ToolCallFormat format) {
  switch (format) {
    case ToolCallFormat::None:
      return "none";
    case ToolCallFormat::JsonInToolCallTags:
      return "json-in-tool-call-tags";
    case ToolCallFormat::ToolCallList:
      return "tool-call-list";
    case ToolCallFormat::XmlFunction:
      return "xml-function";
  }
  return "none";
}

ChatFormat detect_chat_format(std::string_view source) {
  auto has = [&](std::string_view text) { return source.find(text) != std::string_view::npos; };
  ChatFormat format;
  // The XML form also wraps its calls in <tool_call>, so it is asked for first.
  if (has("<TOOLCALL>")) {
    format.tools = ToolCallFormat::ToolCallList;
  } else if (has("<tool_call>") && has("<function=") && has("<parameter=")) {
    format.tools = ToolCallFormat::XmlFunction;
  } else if (has("<tool_call>")) {
    format.tools = ToolCallFormat::JsonInToolCallTags;
  }
  if (has("<think>") && has("</think>")) {
    format.think_open = "<think>";
    format.think_close = "</think>";
  }
  return format;
}

std::string new_tool_call_id(std::mt19937_64& random) {
  static constexpr std::string_view kAlphabet =
      "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
  std::string id = "call_";
  for (int i = 0; i < 24; ++i) id += kAlphabet[random() % kAlphabet.size()];
  return id;
}

ChatOutputParser::ChatOutputParser(ChatFormat format, ChatParseOptions options)
    : format_(std::move(format)), options_(std::move(options)) {
  if (!options_.reasoning || format_.think_open.empty() || format_.think_close.empty()) {
    options_.reasoning = false;
    options_.starts_in_reasoning = false;
  }
  if (format_.tools == ToolCallFormat::None || options_.tool_names.empty()) options_.tool_calls = false;
  in_reasoning_ = options_.starts_in_reasoning;
  skip_space_ = in_reasoning_;
  // Each parser draws its own ids: 24 characters of 62 make a clash between two calls of the
  // server's lifetime as unlikely as a clash of random UUIDs, with no counter shared between
  // requests.
  random_.seed((uint64_t(std::random_device{}()) << 32) ^ std::random_device{}());
}

void ChatOutputParser::emit_text(ChatDelta& delta, std::string_view text, bool reasoning) {
  if (skip_space_) {
    while (!text.empty() && is_space(text.front())) text.remove_prefix(1);
    if (text.empty()) return;
    skip_space_ = false;
  }
  std::string& total = reasoning ? reasoning_ : content_;
  std::string& piece = reasoning ? delta.reasoning : delta.content;
  total.append(text);
  piece.append(text);
}

void ChatOutputParser::emit_calls(ChatDelta& delta, std::vector<std::pair<std::string, std::string>> calls) {
  for (auto& [name, arguments] : calls) {
    if (options_.max_tool_calls > 0 && calls_.size() >= options_.max_tool_calls) return;
    ToolCall call{new_tool_call_id(random_), std::move(name), std::move(arguments)};
    delta.tool_calls.push_back({calls_.size(), call.id, call.name, call.arguments});
    calls_.push_back(std::move(call));
  }
}

// Decides as much of held_ as can be decided: text up to a marker (or up to what may be the start
// of one) is released, a marker switches the mode, a complete call block is parsed.
void ChatOutputParser::drain(ChatDelta& delta) {
  CallMarkers markers = call_markers(format_.tools);
  for (;;) {
    std::string_view held = held_;
    if (in_call_) {
      size_t end = held.find(markers.close);
      if (end == std::string_view::npos) return;  // a call is held until it is complete
      std::string_view body = held.substr(0, end);
      auto calls = parse_call_block(format_.tools, body, options_);
      if (calls) {
        emit_calls(delta, std::move(*calls));
        pending_space_.clear();
      } else {
        // Malformed or to an unknown function: the block, markers and all, is text.
        emit_text(delta, pending_space_, false);
        pending_space_.clear();
        emit_text(delta, std::string(markers.open) + std::string(held.substr(0, end + markers.close.size())),
                  false);
      }
      held_.erase(0, end + markers.close.size());
      in_call_ = false;
      skip_space_ = calls.has_value();
      continue;
    }
    if (in_reasoning_) {
      size_t end = held.find(format_.think_close);
      if (end != std::string_view::npos) {
        emit_text(delta, trim_end(held.substr(0, end)), true);
        held_.erase(0, end + format_.think_close.size());
        in_reasoning_ = false;
        skip_space_ = true;
        continue;
      }
      size_t keep = partial_marker_suffix(held, format_.think_close);
      size_t release = held.size() - keep;
      // Spaces before the close marker are not reasoning: hold them until the next text decides.
      while (release > 0 && is_space(held[release - 1])) --release;
      emit_text(delta, held.substr(0, release), true);
      held_.erase(0, release);
      return;
    }
    // Content: the earliest marker that can open here.
    size_t best = std::string_view::npos;
    std::string_view best_marker;
    auto consider = [&](std::string_view marker, bool enabled) {
      if (!enabled || marker.empty()) return;
      size_t at = held.find(marker);
      if (at < best) {
        best = at;
        best_marker = marker;
      }
    };
    consider(format_.think_open, options_.reasoning);
    consider(markers.open, options_.tool_calls);
    if (best != std::string_view::npos) {
      std::string_view before = held.substr(0, best);
      bool opens_call = best_marker == markers.open;
      if (opens_call) {
        // Spaces between the text and a call belong to neither; they are text again only if the
        // call turns out malformed.
        emit_content_keeping_space(delta, before);
        in_call_ = true;
      } else {
        emit_text(delta, pending_space_, false);
        pending_space_.clear();
        emit_text(delta, before, false);
        in_reasoning_ = true;
        skip_space_ = true;
      }
      held_.erase(0, best + best_marker.size());
      continue;
    }
    size_t keep = 0;
    if (options_.reasoning) keep = std::max(keep, partial_marker_suffix(held, format_.think_open));
    if (options_.tool_calls) keep = std::max(keep, partial_marker_suffix(held, markers.open));
    size_t release = held.size() - keep;
    if (options_.tool_calls) {
      // Trailing spaces may separate this text from a call: held until the next text decides.
      emit_content_keeping_space(delta, held.substr(0, release));
    } else {
      emit_text(delta, held.substr(0, release), false);
    }
    held_.erase(0, release);
    return;
  }
}

void ChatOutputParser::emit_content_keeping_space(ChatDelta& delta, std::string_view text) {
  std::string_view body = trim_end(text);
  if (!body.empty()) {
    emit_text(delta, pending_space_, false);
    pending_space_.clear();
    emit_text(delta, body, false);
  }
  pending_space_.append(text.substr(body.size()));
}

std::string_view ChatOutputParser::trim_end(std::string_view text) {
  while (!text.empty() && is_space(text.back())) text.remove_suffix(1);
  return text;
}

ChatDelta ChatOutputParser::feed(std::string_view text) {
  ChatDelta delta;
  held_.append(text);
  drain(delta);
  return delta;
}

ChatDelta ChatOutputParser::finish() {
  ChatDelta delta;
  drain(delta);
  if (in_call_) {
    // An unfinished call (the reply was cut off): its text is content, as it was generated.
    emit_text(delta, pending_space_, false);
    pending_space_.clear();
    emit_text(delta, std::string(call_markers(format_.tools).open) + held_, false);
  } else if (in_reasoning_) {
    emit_text(delta, held_, true);
  } else {
    // Spaces after the last call are dropped (the reply is the calls); after text they are text.
    if (calls_.empty()) emit_text(delta, pending_space_, false);
    emit_text(delta, held_, false);
  }
  pending_space_.clear();
  held_.clear();
  in_call_ = in_reasoning_ = false;
  return delta;
}

}  // namespace mb::server

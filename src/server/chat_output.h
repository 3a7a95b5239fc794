// SPDX-License-Identifier: MIT
// What a chat reply's generated text holds besides its content: the model's reasoning
// (<think>...</think> or the template's own markers) and its tool calls, in the format the
// checkpoint's chat template uses. The server splits the text it streams with ChatOutputParser
// into OpenAI's content / reasoning_content / tool_calls (chat completions), Responses items and
// Anthropic content blocks, all from the same parse.
//
// Formats (detect_chat_format reads the template's source, as llama.cpp's chat-format detection
// does):
//   JsonInToolCallTags  <tool_call>{"name": ..., "arguments": {...}}</tool_call> (Granite-4.0,
//                       Hermes, Qwen2.5/Qwen3), one tag per call, several calls one after another
//   ToolCallList        <TOOLCALL>[{"name": ..., "arguments": {...}}, ...]</TOOLCALL> (Nemotron-H,
//                       Nemotron-Nano-9B-v2)
//   XmlFunction         <tool_call><function=NAME><parameter=P>value</parameter>...</function>
//                       </tool_call> (Nemotron-3-Nano, Qwen3-Coder, Qwen3.5)
// A template without any of them has ToolCallFormat::None: text that looks like a call stays text.
#pragma once

#include <cstddef>
#include <cstdint>
#include <random>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace mb::server {

enum class ToolCallFormat { None, JsonInToolCallTags, ToolCallList, XmlFunction };
const char* tool_call_format_name(ToolCallFormat format);

struct ChatFormat {
  ToolCallFormat tools = ToolCallFormat::None;
  // The template's thinking markers; empty when it has none (then nothing is split as reasoning).
  std::string think_open, think_close;
};
ChatFormat detect_chat_format(std::string_view template_source);

struct ToolCall {
  std::string id;         // "call_" + 24 characters, unique within the server's lifetime
  std::string name;       // the function's name
  std::string arguments;  // the text of a JSON object, as OpenAI sends it
};
// A new tool-call id: "call_" and 24 letters and digits drawn from `random`.
std::string new_tool_call_id(std::mt19937_64& random);

// What became final with one piece of generated text.
struct ChatDelta {
  std::string content, reasoning;
  // Tool calls as OpenAI streams them: a call's first piece has its id and name (and possibly
  // arguments), later pieces only more of its arguments' text.
  struct ToolCallPiece {
    size_t index = 0;
    std::string id, name, arguments;
  };
  std::vector<ToolCallPiece> tool_calls;
  bool empty() const { return content.empty() && reasoning.empty() && tool_calls.empty(); }
};

struct ChatParseOptions {
  bool reasoning = true;   // split reasoning out (--reasoning-format auto); false: it stays content
  bool tool_calls = true;  // the request has tools and tool_choice is not "none"
  // The request's function names: a call to any other name is not a call and stays text.
  std::vector<std::string> tool_names;
  // The rendered prompt ends inside a thinking block (the generation prompt opened it), so the
  // reply starts as reasoning.
  bool starts_in_reasoning = false;
  // The most calls a reply may make (0 = any): parallel_tool_calls false gives 1, and the calls a
  // model writes past it are dropped, as vLLM does (a forced call's grammar allows only one).
  size_t max_tool_calls = 0;
};

// Splits a reply's text as it is generated. Text that may be the start of a marker is held back
// until it is decided; a tool call is held back until it is complete, then checked (valid JSON
// or parameters, a known name) and released as tool-call pieces, or, when malformed, as content.
class ChatOutputParser {
 public:
  ChatOutputParser(ChatFormat format, ChatParseOptions options);

  ChatDelta feed(std::string_view text);
  // The end of the reply: whatever is still held back (an unfinished marker or call) is released
  // as content (or as reasoning inside an unclosed thinking block). Call once.
  ChatDelta finish();

  // Everything so far, as the non-streaming response reports it.
  const std::string& content() const { return content_; }
  const std::string& reasoning() const { return reasoning_; }
  const std::vector<ToolCall>& tool_calls() const { return calls_; }

 private:
  void drain(ChatDelta& delta);
  void emit_text(ChatDelta& delta, std::string_view text, bool reasoning);
  // Content whose trailing spaces wait in pending_space_ (they may come before a call).
  void emit_content_keeping_space(ChatDelta& delta, std::string_view text);
  void emit_calls(ChatDelta& delta, std::vector<std::pair<std::string, std::string>> calls);
  static std::string_view trim_end(std::string_view text);

  ChatFormat format_;
  ChatParseOptions options_;
  std::string held_;  // text not yet decided
  bool in_reasoning_ = false;
  bool in_call_ = false;  // held_ is the body of a call block whose open marker was seen
  // Spaces at the start of what follows a marker (the newline after </think> or </tool_call>) are
  // no one's text; skip_space_ drops them. Spaces before a call's open marker wait in
  // pending_space_: text again if more text or a malformed call follows, dropped before a call.
  bool skip_space_ = false;
  std::string pending_space_;
  std::mt19937_64 random_;
  std::string content_, reasoning_;
  std::vector<ToolCall> calls_;
};

}  // namespace mb::server

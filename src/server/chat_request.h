// SPDX-License-Identifier: MIT
// What a /v1/chat/completions request gives its chat template, as transformers' apply_chat_template
// would be given it: the messages as the client sent them (every field, contents as strings, null
// or lists of text parts, tool calls, tool results), the request's `tools`, and each entry of
// `chat_template_kwargs` (llama.cpp's and vLLM's field) as a template variable.
//
// The variables are read from the body's text, not from its parsed nlohmann::json, because that
// sorts object keys and a template prints mappings in their key order (Granite-4.0's tools through
// tojson, for one): Python's json.loads keeps the client's order, so these variables keep it too.
#pragma once

#include <cstddef>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "chat/chat_template.h"

namespace mb::server {

// How a template reads two things clients send in more than one form, found once per template by
// probe_template: transformers passes what the client sent, and a template that cannot read it
// fails (or, Llama-3 given a list content, prints the list's repr). For those templates the
// server passes the other form instead, as llama.cpp does, so that every request transformers
// renders is rendered the same, and these render as transformers renders their other form.
struct TemplateReading {
  // Reads a content given as a list of text parts (Granite-4.0 joins their texts itself); if
  // not, the template is given the texts joined as llama.cpp joins them: a "\n" before each text
  // once the joined text is not empty, which is Granite-4.0's own rule.
  bool content_parts = false;
  // Takes tool-call arguments given as the text of a JSON object (OpenAI's form; Granite-4.0 and
  // Nemotron-Nano-9B-v2 print it as it is); if not (Nemotron-3-Nano iterates them as a mapping),
  // the template is given the object that text holds.
  bool string_arguments = true;
};

struct ChatVariables {
  std::string messages;  // the "messages" list as JSON text, in the body's key order
  // A value in `messages` that a template is given in its other form (TemplateReading): its
  // [begin, end) byte range in `messages` and the other form's JSON text.
  struct Rewrite {
    enum Kind { kListContent, kStringArguments } kind;
    size_t begin = 0, end = 0;
    std::string text;
  };
  std::vector<Rewrite> rewrites;  // in the order of `begin`
  std::string tools;              // the "tools" list as JSON text; empty when the request has none
  std::string keyword_arguments;  // chat_template_kwargs' entries as JSON text without the braces

  // The JSON object ChatTemplate::render_json takes, for a template that reads as `reading` says:
  // "messages", then "tools" when given, then the keyword arguments.
  std::string to_json(const TemplateReading& reading) const;
};

// Checks the chat fields of a parsed request body and reads them from its text. Throws ApiError
// (400) naming the field: messages missing, empty, past `max_messages` or not a list; a message
// that is not an object or lacks a role string; a content that is not a string, null or a list of
// text parts (an image or audio part is refused: the models served read text only); tool_calls
// that are not a list of objects; a name or tool_call_id that is not a string; tools that are not
// a list of objects; chat_template_kwargs that is not an object, or names "messages" or "tools"
// (tool_choice and parallel_tool_calls are read by read_chat_reply_options, chat_tools.h).
// `body_text` must be the text `body` was parsed from.
ChatVariables read_chat_variables(std::string_view body_text, const nlohmann::json& body,
                                  size_t max_messages);

// Finds how `chat_template` reads list contents and tool-call arguments by rendering probe
// conversations with `options`: a list content must render without error, with both of its
// texts, and not quoted (as a list's repr or JSON prints them); arguments as JSON text count as
// unreadable only when they make the render fail and the same arguments as an object do not.
TemplateReading probe_template(const ChatTemplate& chat_template, const ChatRenderOptions& options);

}  // namespace mb::server

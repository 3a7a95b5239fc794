// SPDX-License-Identifier: MIT
// Tool calls and reasoning in /v1/chat/completions: what a request asks for (tools, tool_choice,
// parallel_tool_calls, thinking_budget_tokens), how its reply is parsed (ChatOutputParser over the
// served template's format, chat_output.h) and how the parse is reported, as OpenAI does:
// message.tool_calls / reasoning_content, delta.tool_calls / reasoning_content, finish_reason
// "tool_calls". ResponseFormatter (openai_api.cc) calls these; they hold no HTTP.
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "engine/request_decoder.h"
#include "engine/token_constraint.h"
#include "server/chat_output.h"
#include "tokenizer/tokenizer.h"

namespace mb::server {

// The server's settings (`--reasoning-format`, `--reasoning-budget`).
struct ReasoningSettings {
  bool split = true;  // --reasoning-format auto: reasoning goes to reasoning_content; none: content
  int budget = -1;    // --reasoning-budget: tokens of thinking before the close is forced; -1 unlimited
};
// "none" or "auto" (llama-server's deepseek is accepted as auto); throws mb::Error naming the value.
bool parse_reasoning_format(const std::string& value);

enum class ToolChoice { Auto, None, Required, Named };

struct ToolFunction {
  std::string name;
  nlohmann::json parameters;  // the function's JSON schema; null when the tool gives none
};

// A chat request's reply settings: read from the body by read_chat_reply_options, completed when
// the prompt is rendered (settle_chat_reply).
struct ChatReplyOptions {
  std::vector<ToolFunction> functions;  // the request's tools of type "function"
  ToolChoice tool_choice = ToolChoice::Auto;
  std::string tool_choice_name;     // ToolChoice::Named: the function
  bool parallel_tool_calls = true;  // false: at most one call (enforced where a grammar applies)
  std::optional<int> budget;        // thinking_budget_tokens (llama-server's name); -1 unlimited

  // Set by settle_chat_reply.
  bool parse = false;  // the reply goes through ChatOutputParser (else it is content as generated)
  ChatFormat format;
  ChatParseOptions parse_options;
  int reasoning_budget = -1;        // the budget that applies (the request's, else the server's)
  bool starts_in_thinking = false;  // the rendered prompt ends with the thinking block's open marker
};

// Reads tools, tool_choice, parallel_tool_calls and thinking_budget_tokens from a chat body.
// Throws ApiError (400) naming the field: a tool_choice that is not "auto", "none", "required"
// or {"type": "function", "function": {"name": ...}}, a named function the tools do not define,
// "required" without tools, a parallel_tool_calls that is not a boolean, a budget below -1.
void read_chat_reply_options(const nlohmann::json& body, ChatReplyOptions& reply);

// Completes `reply` for the served template's `format` and the rendered `prompt`: whether the
// reply starts inside a thinking block (the prompt ends with the open marker), which tool names
// the parser accepts (none for tool_choice "none"), whether anything needs parsing at all. A
// forced call (tool_choice "required" or named) writes its grammar (tool_call_grammar.h) into
// `grammar`, the request's one output grammar. A tool_choice that needs a tool-call format the
// template lacks, or a forced call in a request that already has a grammar (the "grammar" field,
// response_format), is a 400.
void settle_chat_reply(ChatReplyOptions& reply, const ChatFormat& format, std::string_view prompt,
                       const ReasoningSettings& settings, std::optional<std::string>& grammar);

// The constraint a settled reply decodes under: `grammar` (a forced call or response_format,
// may be null) behind the thinking block (engine/reasoning_budget.h) where the template has
// thinking markers and either a budget applies or the prompt opened the block (the grammar then
// applies once the model closes it), the markers tokenized by `tokenizer`.
std::shared_ptr<TokenConstraint> reply_constraint(const ChatReplyOptions& reply, const Tokenizer& tokenizer,
                                                  std::shared_ptr<TokenConstraint> grammar);

// The parser of a settled reply; nullopt when the reply is content as generated.
std::optional<ChatOutputParser> make_reply_parser(const ChatReplyOptions& reply);

// Appends `more` to `into` (a Done event's text and the parser's finish(), reported together).
void append_delta(ChatDelta& into, ChatDelta more);

// The streamed "delta" objects of one parsed piece, in order, as OpenAI streams them: reasoning
// and content first, then per call a delta with its index, id, type and name (arguments ""),
// then one with its arguments. Empty when the piece decided nothing.
std::vector<nlohmann::json> chat_stream_deltas(const ChatDelta& delta);

// The non-streaming message: content (null when the reply is tool calls and no text),
// reasoning_content when there is reasoning, tool_calls when there are calls.
nlohmann::json chat_reply_message(const ChatOutputParser& parser);

// "tool_calls" when the reply made calls and was not cut off by max_tokens, else the stop
// reason's own (finish_reason in openai_api.h).
const char* chat_finish_reason(const ChatOutputParser& parser, StopReason reason);

}  // namespace mb::server

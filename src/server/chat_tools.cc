// SPDX-License-Identifier: MIT
#include "server/chat_tools.h"

#include <algorithm>
#include <climits>

#include "core/error.h"
#include "core/json_text.h"
#include "engine/reasoning_budget.h"
#include "server/openai_api.h"
#include "server/tool_call_grammar.h"

namespace mb::server {

namespace {

using nlohmann::json;

const json* body_field(const json& body, const char* name) {
  auto it = body.find(name);
  return it == body.end() || it->is_null() ? nullptr : &*it;
}

ApiError wrong_reply_type(const std::string& name, const char* expected, const json& value) {
  return invalid_request(name + " must be " + expected + ", got " + json_excerpt(value));
}

void read_functions(const json& body, ChatReplyOptions& reply) {
  const json* tools = body_field(body, "tools");
  if (!tools || !tools->is_array()) return;  // read_chat_variables refuses a tools that is not a list
  for (size_t i = 0; i < tools->size(); ++i) {
    const json& tool = (*tools)[i];
    const std::string where = "tools[" + std::to_string(i) + "]";
    // A tool without the {"type": "function", "function": {...}} wrapper is taken as the function
    // itself, as the templates take it; other tool types are not functions the model can call.
    const json* type = body_field(tool, "type");
    if (type && *type != "function") continue;
    const json* function = body_field(tool, "function");
    const json& definition = function ? *function : tool;
    if (!definition.is_object()) throw wrong_reply_type(where + ".function", "an object", definition);
    const json* name = body_field(definition, "name");
    if (!name || !name->is_string() || name->get_ref<const std::string&>().empty())
      throw invalid_request(where + ".function.name must be a non-empty string");
    const json* parameters = body_field(definition, "parameters");
    if (parameters && !parameters->is_object())
      throw wrong_reply_type(where + ".function.parameters", "an object (a JSON schema)", *parameters);
    reply.functions.push_back({name->get<std::string>(), parameters ? *parameters : json(nullptr)});
  }
}

bool defines(const ChatReplyOptions& reply, const std::string& name) {
  return std::any_of(reply.functions.begin(), reply.functions.end(),
                     [&](const ToolFunction& f) { return f.name == name; });
}

void read_tool_choice(const json& body, ChatReplyOptions& reply) {
  const json* choice = body_field(body, "tool_choice");
  if (!choice) return;
  const char* expected =
      "\"auto\", \"none\", \"required\" or {\"type\": \"function\", \"function\": {\"name\": ...}}";
  if (choice->is_string()) {
    const std::string& mode = choice->get_ref<const std::string&>();
    if (mode == "auto")
      reply.tool_choice = ToolChoice::Auto;
    else if (mode == "none")
      reply.tool_choice = ToolChoice::None;
    else if (mode == "required")
      reply.tool_choice = ToolChoice::Required;
    else
      throw wrong_reply_type("tool_choice", expected, *choice);
  } else if (choice->is_object()) {
    const json* type = body_field(*choice, "type");
    const json* function = body_field(*choice, "function");
    const json* name = function && function->is_object() ? body_field(*function, "name") : nullptr;
    if (!type || *type != "function" || !name || !name->is_string())
      throw wrong_reply_type("tool_choice", expected, *choice);
    reply.tool_choice = ToolChoice::Named;
    reply.tool_choice_name = name->get<std::string>();
    if (!defines(reply, reply.tool_choice_name))
      throw invalid_request("tool_choice names the function \"" + reply.tool_choice_name +
                            "\", which the request's tools do not define");
  } else {
    throw wrong_reply_type("tool_choice", expected, *choice);
  }
  if (reply.tool_choice == ToolChoice::Required && reply.functions.empty())
    throw invalid_request("tool_choice \"required\" needs tools: the request defines no function to call");
}

}  // namespace

bool parse_reasoning_format(const std::string& value) {
  if (value == "auto" || value == "deepseek") return true;
  if (value == "none") return false;
  throw Error("--reasoning-format must be none or auto, got \"" + value + "\"");
}

void read_chat_reply_options(const json& body, ChatReplyOptions& reply) {
  read_functions(body, reply);
  read_tool_choice(body, reply);
  if (const json* parallel = body_field(body, "parallel_tool_calls")) {
    if (!parallel->is_boolean()) throw wrong_reply_type("parallel_tool_calls", "true or false", *parallel);
    reply.parallel_tool_calls = parallel->get<bool>();
  }
  if (const json* budget = body_field(body, "thinking_budget_tokens")) {
    if (!budget->is_number_integer() || budget->get<int64_t>() < -1 || budget->get<int64_t>() > INT_MAX)
      throw wrong_reply_type("thinking_budget_tokens", "an integer from -1 (unlimited) up", *budget);
    reply.budget = budget->get<int>();
  }
}

void settle_chat_reply(ChatReplyOptions& reply, const ChatFormat& format, std::string_view prompt,
                       const ReasoningSettings& settings, std::optional<std::string>& grammar) {
  reply.format = format;
  const bool forced = reply.tool_choice == ToolChoice::Required || reply.tool_choice == ToolChoice::Named;
  if (forced && format.tools == ToolCallFormat::None)
    throw invalid_request(
        "tool_choice requires a tool call, but the model's chat template has no tool-call format this server "
        "knows (<tool_call> JSON, <TOOLCALL> lists or <function=...> blocks)");
  ChatParseOptions& options = reply.parse_options;
  options.reasoning = settings.split && !format.think_open.empty();
  options.tool_calls = reply.tool_choice != ToolChoice::None && format.tools != ToolCallFormat::None;
  options.tool_names.clear();
  if (options.tool_calls)
    for (const ToolFunction& function : reply.functions) options.tool_names.push_back(function.name);
  if (options.tool_names.empty()) options.tool_calls = false;
  options.max_tool_calls = reply.parallel_tool_calls ? 0 : 1;
  // The generation prompt may open the thinking block itself (Nemotron-3 with enable_thinking):
  // then the reply's first token is already reasoning.
  std::string_view end = prompt;
  while (!end.empty() &&
         (end.back() == '\n' || end.back() == ' ' || end.back() == '\r' || end.back() == '\t'))
    end.remove_suffix(1);
  reply.starts_in_thinking = !format.think_open.empty() && end.size() >= format.think_open.size() &&
                             end.substr(end.size() - format.think_open.size()) == format.think_open;
  options.starts_in_reasoning = reply.starts_in_thinking;
  reply.reasoning_budget = reply.budget.value_or(settings.budget);
  reply.parse = options.reasoning || options.tool_calls;
  if (forced) {
    if (grammar)
      throw invalid_request(
          "tool_choice " +
          std::string(reply.tool_choice == ToolChoice::Required ? "\"required\"" : "naming a function") +
          " constrains the reply to a tool call, and so does the request's grammar or response_format: "
          "give one of them");
    grammar = tool_call_gbnf(format.tools, reply.functions,
                             reply.tool_choice == ToolChoice::Named ? reply.tool_choice_name : "",
                             reply.parallel_tool_calls);
  }
}

std::shared_ptr<TokenConstraint> reply_constraint(const ChatReplyOptions& reply, const Tokenizer& tokenizer,
                                                  std::shared_ptr<TokenConstraint> grammar) {
  if (reply.format.think_close.empty()) return grammar;
  if (reply.reasoning_budget < 0 && !(grammar && reply.starts_in_thinking)) return grammar;
  ReasoningBudgetSpec spec;
  spec.open_ids = tokenizer.encode(reply.format.think_open);
  spec.close_ids = tokenizer.encode(reply.format.think_close);
  spec.starts_inside = reply.starts_in_thinking;
  spec.budget = reply.reasoning_budget;
  if (spec.close_ids.empty()) return grammar;
  return std::make_shared<ReasoningBudgetConstraint>(std::move(spec), grammar ? grammar->clone() : nullptr);
}

std::optional<ChatOutputParser> make_reply_parser(const ChatReplyOptions& reply) {
  if (!reply.parse) return std::nullopt;
  return ChatOutputParser(reply.format, reply.parse_options);
}

void append_delta(ChatDelta& into, ChatDelta more) {
  into.content += more.content;
  into.reasoning += more.reasoning;
  for (auto& piece : more.tool_calls) into.tool_calls.push_back(std::move(piece));
}

std::vector<json> chat_stream_deltas(const ChatDelta& delta) {
  std::vector<json> deltas;
  if (!delta.reasoning.empty()) deltas.push_back({{"reasoning_content", delta.reasoning}});
  if (!delta.content.empty()) deltas.push_back({{"content", delta.content}});
  for (const auto& piece : delta.tool_calls) {
    json call = {{"index", piece.index}};
    if (!piece.id.empty()) {
      call["id"] = piece.id;
      call["type"] = "function";
      call["function"] = {{"name", piece.name}, {"arguments", ""}};
      deltas.push_back({{"tool_calls", json::array({call})}});
      call = {{"index", piece.index}};
    }
    if (!piece.arguments.empty()) {
      call["function"] = {{"arguments", piece.arguments}};
      deltas.push_back({{"tool_calls", json::array({call})}});
    }
  }
  return deltas;
}

json chat_reply_message(const ChatOutputParser& parser) {
  json message = {{"role", "assistant"}};
  const bool calls = !parser.tool_calls().empty();
  message["content"] = calls && parser.content().empty() ? json(nullptr) : json(parser.content());
  if (!parser.reasoning().empty()) message["reasoning_content"] = parser.reasoning();
  if (calls) {
    json list = json::array();
    for (const ToolCall& call : parser.tool_calls())
      list.push_back({{"id", call.id},
                      {"type", "function"},
                      {"function", {{"name", call.name}, {"arguments", call.arguments}}}});
    message["tool_calls"] = std::move(list);
  }
  return message;
}

const char* chat_finish_reason(const ChatOutputParser& parser, StopReason reason) {
  if (!parser.tool_calls().empty() && reason != StopReason::MaxTokens) return "tool_calls";
  return finish_reason(reason);
}

}  // namespace mb::server

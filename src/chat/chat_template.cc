// SPDX-License-Identifier: MIT
// ChatTemplate's entry points: parsing, rendering with transformers' variables, the plain format,
// and finding a model folder's template.
#include "chat/chat_template.h"

#include <filesystem>
#include <nlohmann/json.hpp>

#include "chat/jinja_ast.h"
#include "chat/jinja_eval.h"
#include "core/error.h"
#include "core/json_text.h"
#include "io/file_io.h"

namespace mb {

namespace chat {
struct Program {
  std::vector<std::unique_ptr<Node>> nodes;
};
}  // namespace chat

namespace {

// The plain format, written as a template so that it goes through the same engine. A content
// given as text parts is their texts joined with "\n" (as Granite-4.0 and llama.cpp join them);
// a null or missing one is empty. It has no way to show tools or tool calls, so it refuses them
// rather than leave them out of the prompt unnoticed. An assistant's content follows
// "assistant:" directly, as a reply generated after the generation prompt "assistant:" did: it
// renders back as the text the model saw (" Hello" or ":::" alike), so the next turn's prompt
// starts with the tokens the model consumed and resumes from their cached state instead of
// prefilling the whole reply again.
constexpr std::string_view kPlainTemplate =
    "{% if tools %}{{ raise_exception('the plain chat format (the model has no chat template) cannot "
    "show tools') }}{% endif %}"
    "{% for message in messages %}"
    "{% if message.tool_calls %}{{ raise_exception('the plain chat format (the model has no chat "
    "template) cannot show tool calls') }}{% endif %}"
    "{% set text = namespace(value='') %}"
    "{% if message.content is string %}{% set text.value = message.content %}"
    "{% elif message.content is iterable and message.content is not mapping %}"
    "{% for part in message.content %}{% if part.type == 'text' %}"
    "{% if text.value %}{% set text.value = text.value + '\n' %}{% endif %}"
    "{% set text.value = text.value + part.text %}{% endif %}{% endfor %}{% endif %}"
    "{{ message.role }}:{% if message.role != 'assistant' %} {% endif %}{{ text.value }}\n{% endfor %}"
    "{% if add_generation_prompt %}assistant:{% endif %}";

}  // namespace

ChatTemplate ChatTemplate::parse(std::string_view source) {
  auto program = std::make_shared<chat::Program>();
  program->nodes = chat::parse_template(source);
  return ChatTemplate(std::move(program));
}

ChatTemplate ChatTemplate::plain() {
  return parse(kPlainTemplate);
}

namespace {

// Adds what apply_chat_template always passes (the options' keys, and tools and documents as none)
// under the variables already set, which win as keyword arguments do in transformers.
chat::DictData with_defaults(chat::DictData given, const ChatRenderOptions& options) {
  using chat::Value;
  chat::DictData variables;
  variables.set("add_generation_prompt", Value::boolean(options.add_generation_prompt));
  variables.set("bos_token", Value::string(options.bos_token));
  variables.set("eos_token", Value::string(options.eos_token));
  variables.set("tools", Value::none());
  variables.set("documents", Value::none());
  for (auto& [name, value] : given.entries) variables.set(name, std::move(value));
  return variables;
}

chat::RenderLimits limits_of(const ChatRenderOptions& options) {
  chat::RenderLimits limits;
  limits.max_output_bytes = options.max_output_bytes;
  limits.max_loop_iterations = options.max_loop_iterations;
  limits.max_recursion_depth = options.max_recursion_depth;
  limits.now_unix_seconds = options.now_unix_seconds;
  return limits;
}

}  // namespace

std::string ChatTemplate::render(std::span<const ChatMessage> messages,
                                 const ChatRenderOptions& options) const {
  using chat::Value;
  std::vector<Value> list;
  list.reserve(messages.size());
  for (const ChatMessage& message : messages) {
    chat::DictData entry;
    entry.set("role", Value::string(message.role));
    entry.set("content", Value::string(message.content));
    list.push_back(Value::dict(std::move(entry)));
  }
  chat::DictData given;
  given.set("messages", Value::list(std::move(list)));
  return chat::render_nodes(program_->nodes, with_defaults(std::move(given), options), limits_of(options));
}

std::string ChatTemplate::render_json(std::string_view variables_json,
                                      const ChatRenderOptions& options) const {
  const std::string source = "chat template variables";
  const chat::Value variables = chat::parse_json_value(variables_json, source);
  if (!variables.is_dict()) throw Error(source + ": expected a JSON object");
  const chat::Value* messages = variables.dict_data().find("messages");
  if (messages == nullptr || !messages->is_list()) throw Error(source + ": expected a \"messages\" list");
  return chat::render_nodes(program_->nodes, with_defaults(variables.dict_data(), options),
                            limits_of(options));
}

namespace {

using nlohmann::json;

std::string read_text_file(const std::filesystem::path& path) {
  return read_file_limited(path.string(), kMaxTextFileBytes, "chat template file");
}

// A "chat_template" field: a string, or a list of {"name", "template"} where "default" is used
// and the others are collected into `named`.
std::optional<std::string> template_from_field(const json& field, const std::string& where,
                                               std::vector<std::pair<std::string, std::string>>& named) {
  if (field.is_null()) return std::nullopt;
  if (field.is_string()) return field.get<std::string>();
  if (!field.is_array())
    throw Error(where + ": 'chat_template' must be a string or a list of named templates");
  std::optional<std::string> default_template;
  for (const json& entry : field) {
    if (!entry.is_object() || !entry.contains("name") || !entry.contains("template") ||
        !entry["name"].is_string() || !entry["template"].is_string()) {
      throw Error(where + ": each entry of 'chat_template' must have a string 'name' and 'template'");
    }
    if (entry["name"] == "default" && !default_template)
      default_template = entry["template"].get<std::string>();
    else
      named.emplace_back(entry["name"].get<std::string>(), entry["template"].get<std::string>());
  }
  if (!default_template)
    throw Error(where + ": 'chat_template' lists named templates but none is named 'default'");
  return default_template;
}

// bos_token / eos_token: a string, or an added-token object whose "content" is the text.
std::string token_field(const json& config, const char* key, const std::string& where) {
  const auto it = config.find(key);
  if (it == config.end() || it->is_null()) return "";
  if (it->is_string()) return it->get<std::string>();
  if (it->is_object() && it->contains("content") && (*it)["content"].is_string()) {
    return (*it)["content"].get<std::string>();
  }
  throw Error(where + ": '" + key + "' must be a string or an object with a string 'content'");
}

}  // namespace

std::optional<ModelChatTemplate> find_chat_template(const std::string& model_dir) {
  namespace fs = std::filesystem;
  const fs::path dir(model_dir);
  ModelChatTemplate found;
  std::optional<std::string> source;
  const fs::path config_path = dir / "tokenizer_config.json";
  if (fs::exists(config_path)) {
    const std::string where = config_path.string();
    const json config = parse_json_text(read_text_file(config_path), where, 64);
    if (!config.is_object()) throw Error(where + ": expected a JSON object");
    found.options.bos_token = token_field(config, "bos_token", where);
    found.options.eos_token = token_field(config, "eos_token", where);
    if (const auto it = config.find("chat_template"); it != config.end()) {
      source = template_from_field(*it, where, found.named);
      found.origin = where;
    }
  }
  if (!source && fs::exists(dir / "chat_template.jinja")) {
    source = read_text_file(dir / "chat_template.jinja");
    found.origin = (dir / "chat_template.jinja").string();
  }
  if (!source && fs::exists(dir / "chat_template.json")) {
    const fs::path path = dir / "chat_template.json";
    const json file = parse_json_text(read_text_file(path), path.string(), 64);
    if (!file.is_object() || !file.contains("chat_template")) {
      throw Error(path.string() + ": expected an object with a 'chat_template' field");
    }
    source = template_from_field(file["chat_template"], path.string(), found.named);
    found.origin = path.string();
  }
  if (!source) return std::nullopt;
  found.source = std::move(*source);
  return found;
}

}  // namespace mb

// SPDX-License-Identifier: MIT
// Chat templates: turning a list of chat messages into the prompt text a model was trained on.
//
// Hugging Face checkpoints ship their prompt format as a Jinja2 template (tokenizer_config.json's
// "chat_template", or chat_template.jinja). This library implements the subset of Jinja2 that real
// chat templates use (a lexer, a parser into an AST and an evaluator, see src/chat/jinja_*.h) and
// renders it the way transformers' apply_chat_template does: with trim_blocks and lstrip_blocks
// on, the messages as `messages` (a list of {"role", "content"} mappings), `add_generation_prompt`,
// `bos_token`, `eos_token`, `tools` and `documents` (none unless given, as transformers passes
// them), `raise_exception(message)` and `strftime_now(format)` in scope.
//
// Templates are untrusted input like every other file of a checkpoint folder: parse() and render()
// throw mb::Error naming the problem and its line for unsupported or malformed syntax, and render()
// bounds recursion depth, loop iterations and the size of every string it builds, so a hostile
// template cannot hang or exhaust the server. A ChatTemplate is immutable after parse(), cheap to
// copy, and safe to render from several threads at once.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace mb {

namespace chat {
struct Program;
}

struct ChatMessage {
  std::string role;  // "system", "user", "assistant", "tool", ...
  std::string content;

  friend bool operator==(const ChatMessage&, const ChatMessage&) = default;
};

struct ChatRenderOptions {
  // Ends the prompt with the header of an assistant turn, so that the model writes the reply.
  bool add_generation_prompt = true;
  std::string bos_token, eos_token;  // from tokenizer_config.json / the tokenizer
  // The time strftime_now() formats, in seconds since the Unix epoch, read as UTC. Unset means the
  // current local time (as transformers does); tests set it so that dated templates render the
  // same every day.
  std::optional<int64_t> now_unix_seconds;
  // Limits against hostile templates; exceeding one throws mb::Error. The output limit also bounds
  // every string, list and mapping built along the way (a doubling loop cannot reach it unnoticed).
  std::size_t max_output_bytes = std::size_t{64} << 20;
  int64_t max_loop_iterations = 1'000'000;  // loop bodies run, over the whole render
  int max_recursion_depth = 64;             // macro calls nested in macro calls
};

class ChatTemplate {
 public:
  // Parses a Jinja chat template. Throws mb::Error naming the construct it cannot handle
  // (e.g. "chat template: unsupported filter 'foo' at line 3").
  static ChatTemplate parse(std::string_view source);

  // The documented plain format for checkpoints without a template: each message as
  //   "<role>: <content>\n"
  // in order, then "assistant:" (no trailing space or newline) when add_generation_prompt is set.
  // No BOS or EOS token is added. For example, a system and a user message render as
  //   "system: Be brief.\nuser: Hi!\nassistant:"
  // An assistant's content follows "assistant:" directly ("assistant: Hi\n" for " Hi"), as the
  // reply the model generated after the generation prompt did, so it renders back as the text the
  // model saw and the next turn resumes after it.
  // Through render_json, a content given as a list of text parts is their texts joined with "\n"
  // (none before the first non-empty text), a null or missing content is empty, and tools or
  // tool calls are refused (the format cannot show them).
  static ChatTemplate plain();

  // Renders the messages; throws mb::Error on a render-time problem (raise_exception in the
  // template, a message missing a field, a loop past the iteration limit...).
  std::string render(std::span<const ChatMessage> messages, const ChatRenderOptions& options) const;

  // Renders with everything else apply_chat_template can pass, given as the text of one JSON
  // object: "messages" (a list whose messages may carry a null or list-of-parts content,
  // "tool_calls", "reasoning_content" or any other key), "tools", "documents", and any other key
  // as a template keyword argument ("enable_thinking", ...). Keys of `options`
  // (add_generation_prompt, bos_token, eos_token) apply unless the object sets them; tools and
  // documents are none unless it sets them. Mappings keep their key order, as Python's do, so that
  // tojson prints them as transformers would. Throws mb::Error for text that is not a JSON object
  // with a "messages" list (nesting deeper than the template values allow included), and for
  // what render() throws for.
  std::string render_json(std::string_view variables_json, const ChatRenderOptions& options) const;

 private:
  explicit ChatTemplate(std::shared_ptr<const chat::Program> program) : program_(std::move(program)) {}
  std::shared_ptr<const chat::Program> program_;
};

// The chat template of a model folder: tokenizer_config.json's "chat_template" (a string, or a list
// of {name, template} where "default" is used), else chat_template.jinja / chat_template.json when
// present; std::nullopt when the folder has none. Fills bos/eos from tokenizer_config.json when given
// (a plain string, or an added-token object {"content": ...}). Throws mb::Error naming the file when
// one is present but malformed.
struct ModelChatTemplate {
  std::string source;
  ChatRenderOptions options;
  // Where the template was read, as the user is told: a file's path, or for a GGUF file its path
  // and the metadata key (engine/gguf_chat_template.h).
  std::string origin;
  // The other named templates ({name, template}, e.g. "tool_use"), in the order given; the one in
  // `source` is the list's "default".
  std::vector<std::pair<std::string, std::string>> named;
};
std::optional<ModelChatTemplate> find_chat_template(const std::string& model_dir);

}  // namespace mb

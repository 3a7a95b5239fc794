// ChatTemplate's entry points and find_chat_template. The Jinja engine itself is being written;
// until it lands, parse() keeps the source and render() refuses it.
#include "chat/chat_template.h"

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/error.h"
#include "core/json_text.h"

namespace mb {

namespace chat {
struct Program {
  bool plain = false;
  std::string source;
};
}  // namespace chat

ChatTemplate ChatTemplate::parse(std::string_view source) {
  auto program = std::make_shared<chat::Program>();
  program->source = std::string(source);
  return ChatTemplate(std::move(program));
}

ChatTemplate ChatTemplate::plain() {
  auto program = std::make_shared<chat::Program>();
  program->plain = true;
  return ChatTemplate(std::move(program));
}

std::string ChatTemplate::render(std::span<const ChatMessage> messages,
                                 const ChatRenderOptions& options) const {
  if (!program_->plain) throw Error("chat template: Jinja rendering is not implemented yet");
  std::string out;
  for (const ChatMessage& message : messages) out += message.role + ": " + message.content + "\n";
  if (options.add_generation_prompt) out += "assistant:";
  return out;
}

std::optional<ModelChatTemplate> find_chat_template(const std::string& model_dir) {
  (void)model_dir;
  return std::nullopt;
}

}  // namespace mb

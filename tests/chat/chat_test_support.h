// SPDX-License-Identifier: MIT
// Helpers shared by the chat template tests.
#pragma once

#include <string>
#include <vector>

#include "chat/chat_template.h"
#include "core/error.h"

namespace mb::chat_test {

inline std::string render(const std::string& source, const std::vector<ChatMessage>& messages = {},
                          ChatRenderOptions options = {}) {
  return ChatTemplate::parse(source).render(messages, options);
}

// The mb::Error message that parsing or rendering throws ("" when nothing is thrown).
inline std::string error_of(const std::string& source, const std::vector<ChatMessage>& messages = {},
                            ChatRenderOptions options = {}) {
  try {
    render(source, messages, options);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace mb::chat_test

// SPDX-License-Identifier: MIT
// The chat page `mambacpp serve` answers GET / with: src/server/chat_page.html (inline CSS, and
// vanilla JS over the server's own streaming /v1/chat/completions from chat_page_markdown.js and
// chat_page_chat.js, put into its one script), embedded into the binary at build time by
// cmake/embed_chat_page.cmake, so the server needs no files at run time.
#pragma once

#include <string_view>

namespace mb::server {

struct ChatPage {
  std::string_view html;
  // Allows the page's own inline script and style (by their SHA-256) and requests to the server
  // that sent it, and nothing else: no external sources, no frames, no form posts.
  std::string_view content_security_policy;
  std::string_view etag;  // a quoted hash of the page, which changes only with the binary
};

const ChatPage& chat_page();

}  // namespace mb::server

// SPDX-License-Identifier: MIT
// The C API's chat: an mb_chat is a server::ChatSession over the model, with the model's own
// template, so a conversation driven from C renders, resumes and answers as `mambacpp chat` and
// `mambacpp serve` do.
#include <atomic>
#include <string>

#include "capi_common.h"
#include "server/chat_session.h"

using mb::capi::CallError;
using mb::capi::guard;
using mb::capi::LoadedModel;
using mb::capi::Lock;
using mb::capi::require;

struct mb_chat {
  std::shared_ptr<LoadedModel> model;  // keeps the weights and tokenizer alive
  mb::server::ServedChatTemplate chat_template;
  std::unique_ptr<mb::server::ChatSession> session;
};

extern "C" {

mb_chat_params mb_chat_params_default(void) {
  const mb::server::ChatSessionOptions d;
  mb_chat_params params{};
  params.max_tokens = d.max_tokens;
  params.max_context = d.max_context;
  params.sampling = mb_sampling_default();
  params.stop_at_eos = 1;
  return params;
}

mb_status mb_chat_new(mb_model* model, const mb_chat_params* params, mb_chat** out) {
  if (out != nullptr) *out = nullptr;
  return guard("mb_chat_new", MB_ERR_INVALID_ARGUMENT, [&] {
    require(model, "model");
    require(out, "out");
    const mb_chat_params given = params == nullptr ? mb_chat_params_default() : *params;
    const std::shared_ptr<LoadedModel>& impl = model->impl;
    if (!impl->tokenizer)
      throw CallError(MB_ERR_UNSUPPORTED, "a chat needs a tokenizer, and the model has none");
    auto chat = std::make_unique<mb_chat>();
    chat->model = impl;
    chat->chat_template = mb::server::load_served_chat_template(impl->path);
    if (!chat->chat_template.error.empty())
      throw CallError(MB_ERR_UNSUPPORTED,
                      "the model's chat template cannot be used: " + chat->chat_template.error);
    mb::server::ChatSessionOptions options;
    if (given.system != nullptr) options.system = given.system;
    options.max_tokens = given.max_tokens;
    options.max_context = given.max_context;
    options.sampling = mb::capi::sampling_params(given.sampling);
    options.stop_at_eos = given.stop_at_eos != 0;
    if (given.template_kwargs != nullptr) options.template_kwargs = given.template_kwargs;
    chat->session = std::make_unique<mb::server::ChatSession>(
        *impl->model, *impl->tokenizer, chat->chat_template, mb::capi::context_of(*impl), options);
    *out = chat.release();
  });
}

void mb_chat_free(mb_chat* chat) {
  delete chat;
}

mb_status mb_chat_send(mb_chat* chat, const char* message, mb_text_callback callback, void* user_data,
                       mb_chat_reply* reply) {
  if (reply != nullptr) *reply = mb_chat_reply{};
  return guard("mb_chat_send", MB_ERR_INVALID_ARGUMENT, [&] {
    require(chat, "chat");
    require(message, "message");
    require(reply, "reply");
    std::atomic<bool> stop{false};
    const auto on_text = [&](std::string_view text) {
      if (callback == nullptr) return;
      // The piece is handed over NUL-terminated, which a string_view is not.
      const std::string piece(text);
      if (callback(piece.c_str(), piece.size(), user_data) != 0) stop.store(true);
    };
    mb::server::ChatTurn turn;
    {
      const Lock lock(*chat->model);
      turn = chat->session->reply(message, on_text, &stop);
    }
    mb_chat_reply out{};
    out.text = mb::capi::copy_string(turn.reply);
    out.text_len = turn.reply.size();
    out.prompt_tokens = turn.prompt_tokens;
    out.cached_tokens = turn.cached_tokens;
    out.completion_tokens = turn.completion_tokens;
    out.stop_reason = mb::capi::stop_reason(turn.stop_reason);
    *reply = out;
  });
}

void mb_chat_reply_free(mb_chat_reply* reply) {
  if (reply == nullptr) return;
  std::free(reply->text);
  *reply = mb_chat_reply{};
}

mb_status mb_chat_add(mb_chat* chat, const char* role, const char* content) {
  return guard("mb_chat_add", MB_ERR_INVALID_ARGUMENT, [&] {
    require(chat, "chat");
    require(role, "role");
    require(content, "content");
    chat->session->add_message({role, content});
  });
}

mb_status mb_chat_clear(mb_chat* chat) {
  return guard("mb_chat_clear", MB_ERR_INVALID_ARGUMENT, [&] {
    require(chat, "chat");
    chat->session->clear();
  });
}

}  // extern "C"

// SPDX-License-Identifier: MIT
#include "server/chat_session.h"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "tokenizer/utf8.h"

namespace mb::server {

void require_chat_utf8(std::string_view text, const std::string& what) {
  const size_t at = tok::invalid_utf8_offset(text);
  if (at == std::string_view::npos) return;
  char byte[8];
  std::snprintf(byte, sizeof byte, "0x%02x", static_cast<unsigned>(static_cast<uint8_t>(text[at])));
  throw Error(what + " is not valid UTF-8 (byte " + byte + " at offset " + std::to_string(at) + ")");
}

ChatSession::ChatSession(const Model& model, const Tokenizer& tokenizer, const ServedChatTemplate& chat,
                         ComputeContext ctx, ChatSessionOptions options)
    : tokenizer_(tokenizer), chat_(chat), options_(std::move(options)) {
  if (!chat_.error.empty()) throw Error("the model's chat template cannot be used: " + chat_.error);
  if (options_.max_tokens < 0) throw Error("max_tokens must be >= 0");
  if (options_.max_context < 0) throw Error("max_context must be >= 0");
  options_.sampling.validate();
  require_chat_utf8(options_.system, "the system message");
  for (const std::string& stop : options_.stop) require_chat_utf8(stop, "the stop string");
  if (!options_.template_kwargs.empty()) {
    if (!nlohmann::ordered_json::parse(options_.template_kwargs, nullptr, false).is_object())
      throw Error(
          "the chat template's keyword arguments must be a JSON object, e.g. {\"enable_thinking\": false}");
  }
  if (options_.max_messages < 3) throw Error("max_messages must be >= 3 (a system message and a turn)");
  defaults_.max_context = options_.max_context;
  defaults_.max_messages = options_.max_messages;
  SchedulerOptions scheduler;
  // One conversation at a time; the cache keeps its states between turns.
  scheduler.max_active = 1;
  scheduler.max_context = options_.max_context;
  scheduler.cache_bytes = options_.cache_bytes;
  scheduler_ = std::make_unique<Scheduler>(model, &tokenizer_, ctx, scheduler);
  clear();
}

ChatSession::~ChatSession() = default;

void ChatSession::add_message(ChatMessage message) {
  require_chat_utf8(message.role, "the message's role");
  require_chat_utf8(message.content, "the message");
  messages_.push_back(std::move(message));
}

void ChatSession::clear() {
  messages_.clear();
  if (!options_.system.empty()) messages_.push_back({"system", options_.system});
}

// The conversation as a /v1/chat/completions body, so it is rendered, tokenized and bounded by
// the code that serves the same request over HTTP. Keys keep their order (role, then content), as
// a client's JSON would give them to a template that prints mappings. The sampling floats come back
// as written: JSON prints a number so that it parses to the same double, which rounds back to the
// same float.
std::string ChatSession::request_body() const {
  nlohmann::ordered_json messages = nlohmann::ordered_json::array();
  for (const ChatMessage& m : messages_) messages.push_back({{"role", m.role}, {"content", m.content}});
  const SamplingParams& s = options_.sampling;
  nlohmann::ordered_json body = {{"messages", messages},
                                 {"max_tokens", options_.max_tokens},
                                 {"temperature", s.temperature},
                                 {"top_k", s.top_k},
                                 {"top_p", s.top_p},
                                 {"min_p", s.min_p},
                                 {"repeat_penalty", s.repeat_penalty},
                                 {"repeat_last_n", s.repeat_last_n},
                                 {"presence_penalty", s.presence_penalty},
                                 {"frequency_penalty", s.frequency_penalty},
                                 {"seed", s.seed},
                                 {"ignore_eos", !options_.stop_at_eos}};
  if (!options_.stop.empty()) body["stop"] = options_.stop;
  if (!options_.template_kwargs.empty())
    body["chat_template_kwargs"] = nlohmann::ordered_json::parse(options_.template_kwargs);
  return body.dump();
}

ChatTurn ChatSession::reply(std::string_view user, const std::function<void(std::string_view)>& on_text,
                            const std::atomic<bool>* interrupt) {
  const auto start = std::chrono::steady_clock::now();
  require_chat_utf8(user, "the message");
  ChatTurn turn;
  // The oldest turns go first, whole (a user message and the reply to it), so that roles still
  // alternate; the system message stays. The caller is told how many went.
  const size_t kept_first = !options_.system.empty() && !messages_.empty() && messages_[0].role == "system";
  std::vector<ChatMessage> dropped;
  // Drops the oldest turn before the last `keep` messages; false when there is none.
  const auto drop_oldest_turn = [&](size_t keep) {
    if (messages_.size() <= kept_first + keep) return false;
    const size_t count = std::min<size_t>(2, messages_.size() - kept_first - keep);
    dropped.insert(dropped.end(), messages_.begin() + kept_first, messages_.begin() + kept_first + count);
    messages_.erase(messages_.begin() + kept_first, messages_.begin() + kept_first + count);
    return true;
  };
  while (messages_.size() + 1 > options_.max_messages && drop_oldest_turn(0)) {
  }
  // A turn that fails puts the dropped messages back: the conversation stays as it was.
  const auto restore = [&] {
    messages_.pop_back();
    messages_.insert(messages_.begin() + kept_first, dropped.begin(), dropped.end());
  };
  messages_.push_back({"user", std::string(user)});
  ApiRequest request;
  // A conversation that has outgrown the context (-c) or the prompt a request may carry drops its
  // oldest turns until the new message fits, as llama-cli shifts its context, rather than refuse
  // every message from then on; a message that does not fit even alone is refused.
  for (;;) {
    try {
      request = prepare_api_request(ApiKind::Chat, request_body(), tokenizer_, chat_, defaults_,
                                    options_.sampling.seed, "");
      break;
    } catch (const ApiError& e) {
      if (e.code == "context_length_exceeded" && drop_oldest_turn(1)) continue;
      restore();
      throw;
    } catch (...) {
      restore();  // the conversation stays as it was, whatever failed
      throw;
    }
  }
  turn.dropped_messages = dropped.size();
  request.serve.logprobs = false;
  std::string error;
  bool done = false, cancelled = false;
  const RequestId id = scheduler_->submit(std::move(request.serve), [&](const ServeEvent& event) {
    switch (event.kind) {
      case ServeEvent::Kind::Token:
        turn.tokens.push_back(event.token);
        turn.reply += event.text;
        if (on_text && !event.text.empty()) on_text(event.text);
        break;
      case ServeEvent::Kind::Done:
        turn.reply += event.text;
        if (on_text && !event.text.empty()) on_text(event.text);
        turn.stop_reason = event.stop_reason;
        turn.prompt_tokens = event.prompt_tokens;
        turn.cached_tokens = event.cached_tokens;
        turn.completion_tokens = event.completion_tokens;
        done = true;
        break;
      case ServeEvent::Kind::Error:
        error = event.error;
        break;
    }
    return true;
  });
  const auto check_interrupt = [&] {
    if (!cancelled && interrupt != nullptr && interrupt->load(std::memory_order_relaxed)) {
      scheduler_->cancel(id);
      cancelled = true;
    }
  };
  // Checked after every step rather than as events arrive: a long prompt's prefill is many steps
  // of the scheduler's token budget, and no event comes before it ends. A cancel still ends with a
  // Done event that carries the usage.
  check_interrupt();
  while (scheduler_->step()) check_interrupt();
  if (!done) {
    restore();
    throw Error("the reply failed: " + (error.empty() ? std::string("no answer") : error));
  }
  if (cancelled && turn.completion_tokens == 0 && turn.reply.empty()) {
    restore();
    turn.answered = false;
    turn.dropped_messages = 0;
  } else {
    messages_.push_back({"assistant", turn.reply});
  }
  turn.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return turn;
}

}  // namespace mb::server

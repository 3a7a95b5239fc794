// SPDX-License-Identifier: MIT
// The routes of the agent APIs, /v1/responses (responses_api.h) and /v1/messages
// (messages_api.h): each translates its body into a chat request and runs it through the same
// life cycle as /v1/chat/completions (HttpServer::run_generation), with its own formatter.
#include <httplib.h>

#include <chrono>

#include "server/http_server.h"
#include "server/messages_api.h"

namespace mb::server {

namespace {

constexpr const char* kJsonType = "application/json; charset=utf-8";

int64_t seconds_now() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// An error body this server wrote in OpenAI's shape, rewritten in Anthropic's for its paths, so
// that every error of /v1/messages (a bad body, the API key, a full queue, an unknown path under
// it) reads as Anthropic's clients expect.
void anthropic_error_shape(const httplib::Request& req, httplib::Response& res) {
  if (res.status < 400 || !is_messages_path(req.path) || res.body.empty()) return;
  const nlohmann::json body = nlohmann::json::parse(res.body, nullptr, false);
  if (!body.is_object() || !body.contains("error") || !body["error"].is_object()) return;
  const nlohmann::json& message = body["error"]["message"];
  res.body = anthropic_error_json(res.status, message.is_string() ? message.get<std::string>() : "error");
  // httplib has set the Content-Length of the body it had when it calls this handler.
  res.headers.erase("Content-Length");
  res.set_header("Content-Length", std::to_string(res.body.size()));
}

}  // namespace

void HttpServer::register_agent_routes() {
  httplib::Server& http = *http_;
  http.set_post_routing_handler(anthropic_error_shape);
  const auto route = [this](auto handler) {
    return [this, handler](const httplib::Request& req, httplib::Response& res) {
      res.status = 200;
      try {
        if (!ready_.load(std::memory_order_acquire)) {
          res.set_header("Retry-After", "1");
          throw ApiError(503, "unavailable_error", "the model is still loading", "loading");
        }
        handler(req, res);
      } catch (const ApiError& e) {
        res.status = e.status;
        res.set_content(error_json(e.what(), e.type, e.code), kJsonType);
      } catch (const Error& e) {
        res.status = 400;
        res.set_content(error_json(e.what(), "invalid_request_error"), kJsonType);
      }
    };
  };

  http.Post(
      "/v1/responses", route([this](const httplib::Request& req, httplib::Response& res) {
        const uint64_t random = next_seed();
        run_generation(
            prefixed_id("resp_", random, next_seed()),
            [&](const std::string& id) {
              ResponsesRequest translated =
                  translate_responses_request(req.body, &responses_, options_.defaults.max_messages);
              Generation generation;
              generation.request =
                  prepare_api_request(ApiKind::Chat, translated.chat_body, *model_.tokenizer, model_.chat,
                                      options_.defaults, next_seed(), options_.model_id, model_.trie);
              const bool stream = generation.request.stream;
              generation.formatter = std::make_shared<ResponsesFormatter>(
                  generation.request, std::move(translated), &responses_,
                  make_reply_splitter(generation.request, model_.chat), id, random, seconds_now(), stream);
              return generation;
            },
            req, res);
      }));

  http.Post("/v1/messages", route([this](const httplib::Request& req, httplib::Response& res) {
              run_generation(
                  prefixed_id("msg_", next_seed(), next_seed()),
                  [&](const std::string& id) {
                    MessagesRequest translated =
                        translate_messages_request(req.body, false, options_.defaults.max_messages);
                    Generation generation;
                    generation.request = prepare_api_request(
                        ApiKind::Chat, translated.chat_body, *model_.tokenizer, model_.chat,
                        options_.defaults, next_seed(), options_.model_id, model_.trie);
                    const bool stream = generation.request.stream;
                    generation.formatter = std::make_shared<MessagesFormatter>(
                        generation.request, std::move(translated),
                        make_reply_splitter(generation.request, model_.chat), id, stream);
                    return generation;
                  },
                  req, res);
            }));

  // The prompt's length as /v1/messages would render it; nothing is generated.
  http.Post("/v1/messages/count_tokens", route([this](const httplib::Request& req, httplib::Response& res) {
              const MessagesRequest translated =
                  translate_messages_request(req.body, true, options_.defaults.max_messages);
              const ApiRequest request =
                  prepare_api_request(ApiKind::Chat, translated.chat_body, *model_.tokenizer, model_.chat,
                                      options_.defaults, 0, options_.model_id, model_.trie);
              res.set_content(count_tokens_response(request.serve.prompt.size()).dump(), kJsonType);
            }));
}

}  // namespace mb::server

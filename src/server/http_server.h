// SPDX-License-Identifier: MIT
// The HTTP side of `mambacpp serve`: cpp-httplib routes, the API key, body limits, metrics and a
// draining shutdown, around a Scheduler that does the generation.
//
// The server listens before the model is loaded, so /health can answer 503 {"status": "loading"}
// while the weights come in, and every other endpoint answers 503 with Retry-After until then,
// except GET /, the chat page (chat_page.h), which is there at once and needs no API key.
// Each generation request is parsed and validated on its connection's thread (openai_api.h), then
// submitted to the scheduler with a sink that queues its events for that thread, which writes
// them out as one JSON body or as server-sent events. A stream whose client has gone away fails
// its next write; the request is then cancelled and its slot freed, and no other request's stream
// is touched: every request has its own queue and its own connection.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "engine/embed.h"
#include "server/api_formatter.h"
#include "server/embeddings_api.h"
#include "server/openai_api.h"
#include "server/responses_api.h"

namespace httplib {
class Server;
struct Request;
struct Response;
}  // namespace httplib

namespace mb::server {

struct ServerOptions {
  std::string host = "127.0.0.1";   // an IPv6 address may be in brackets ("[::1]")
  int port = 8080;                  // 0 = any free port (bound_port() tells which)
  std::string api_key;              // "" = no key; else required on all but /health and GET /
  int timeout_seconds = 600;        // --timeout: write timeout of a response
  int read_timeout_seconds = 10;    // --read-timeout: a request's bytes must keep arriving
  int max_connections_per_ip = 64;  // --max-conns-per-ip (0 = no cap)
  // --max-connections: connections held at once, past which the longest-waiting one is closed;
  // 0 = 4096. At most the open-file limit (raised to its hard limit by the server) less 192.
  size_t max_connections = 0;
  // --trusted-proxy: addresses or CIDR ranges whose X-Forwarded-For is believed (connections.h).
  std::vector<std::string> trusted_proxies;
  size_t max_body_bytes = 8u << 20;  // --max-body: larger request bodies get 413
  int http_threads = 0;              // requests answered at once; 0 = 64
  std::string model_id;              // the name /v1/models reports
  bool log_requests = true;          // one line on stderr per generation request
  ApiDefaults defaults;
};

// Everything the endpoints need once the model is loaded. The pointees outlive the server.
struct ServedModel {
  Scheduler* scheduler = nullptr;
  const Tokenizer* tokenizer = nullptr;
  int64_t vocab_size = 0;   // the model's; prompt ids must lie below it
  ServedChatTemplate chat;  // the checkpoint's, or the plain format (and why its own is unusable)
  int64_t max_context = 0;  // prompt + reply per request (-c, or the model's default); 0 = none
  // /v1/embeddings (server/embeddings_api.h): answered 400 while embeddings.d_model is 0.
  EmbeddingsModel embeddings;
  Pooling pooling = Pooling::Mean;  // --pooling
  // The tokenizer's byte strings for grammars (engine/grammar/grammar_constraint.h); set_model
  // builds it when null.
  std::shared_ptr<const TokenTrie> trie;
};

class HttpServer {
 public:
  explicit HttpServer(ServerOptions options);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Binds the listening socket; throws mb::Error naming the address when it cannot.
  void bind();
  int bound_port() const { return port_; }
  // "http://HOST:PORT", an IPv6 host in brackets ("http://[::1]:8080").
  std::string url() const;
  // Accepts connections on a background thread until stop().
  void start();
  // Makes the generation endpoints live and /health 200.
  void set_model(ServedModel model);
  // Refuses new generation requests (503) and waits until the requests in flight have ended or
  // `timeout` has passed; returns whether they all ended.
  bool drain(std::chrono::milliseconds timeout);
  // Stops listening, closes the connections and joins the server's threads.
  void stop();

 private:
  struct Stream;
  struct RequestLog;
  void register_routes();
  void register_agent_routes();  // /v1/responses, /v1/messages (http_agent_routes.cc)
  void handle_generation(ApiKind kind, const httplib::Request& request, httplib::Response& response);
  nlohmann::json handle_embeddings(const httplib::Request& request);
  // The life cycle every generation API shares (admission, streaming, cancel on disconnect, the
  // log line): `prepare` turns the body into a chat or completion request and its API's formatter.
  struct Generation {
    ApiRequest request;
    std::shared_ptr<ApiFormatter> formatter;
  };
  using GenerationPreparer = std::function<Generation(const std::string& id)>;
  void run_generation(const std::string& id, const GenerationPreparer& prepare,
                      const httplib::Request& request, httplib::Response& response);
  std::string layer_error_body(int status) const;  // the answers the connection layer gives itself
  void count(uint64_t HttpCounters::*counter);
  uint64_t next_seed();

  ServerOptions options_;
  std::unique_ptr<httplib::Server> http_;
  std::thread listener_;
  std::atomic<bool> listener_done_{false};  // listen_after_bind() has returned
  int port_ = 0;
  int64_t started_unix_ = 0;

  std::atomic<bool> ready_{false};
  std::atomic<bool> draining_{false};
  ServedModel model_;

  std::mutex mutex_;  // guards the counters and the in-flight count
  std::condition_variable idle_;
  HttpCounters counters_;
  int64_t in_flight_ = 0;
  uint64_t next_response_id_ = 0;
  uint64_t seed_state_;
  ResponseStore responses_;  // /v1/responses' conversations, for previous_response_id
};

}  // namespace mb::server

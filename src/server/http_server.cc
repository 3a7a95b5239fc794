// SPDX-License-Identifier: MIT
#include "server/http_server.h"

#include "server/chat_page.h"
#include "server/connections.h"
#include "server/request_surface.h"

#include <httplib.h>
#include <sys/socket.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <deque>
#include <random>
#include <vector>

namespace mb::server {

using nlohmann::json;

namespace {

constexpr const char* kJson = "application/json; charset=utf-8";
// How often a stream waiting for its next event checks that its client is still there.
constexpr auto kStreamPoll = std::chrono::milliseconds(200);

void send_error(httplib::Response& res, int status, const std::string& message,
                const std::string& code = "") {
  res.status = status;
  res.set_content(error_json(message, error_type_for_status(status), code), kJson);
}

void send_api_error(httplib::Response& res, const ApiError& e) {
  res.status = e.status;
  res.set_content(error_json(e.what(), e.type, e.code), kJson);
}

void send_json(httplib::Response& res, const json& body) {
  res.status = 200;
  res.set_content(body.dump(-1, ' ', false, json::error_handler_t::replace), kJson);
}

// Compares without an early exit, so the time taken does not reveal how much of a key matched.
bool same_secret(const std::string& given, const std::string& expected) {
  unsigned char difference = given.size() == expected.size() ? 0 : 1;
  for (size_t i = 0; i < given.size(); ++i)
    difference |= static_cast<unsigned char>(given[i] ^ expected[i % std::max<size_t>(expected.size(), 1)]);
  return difference == 0;
}

// The key of an "Authorization: Bearer KEY" header, else of "X-Api-Key". Authentication schemes
// are case-insensitive (RFC 7235), so "bearer" and "BEARER" are the same scheme.
std::string api_key_of(const httplib::Request& req) {
  const std::string authorization = req.get_header_value("Authorization");
  const std::string bearer = "bearer";
  const bool is_bearer =
      authorization.size() > bearer.size() && authorization[bearer.size()] == ' ' &&
      std::equal(bearer.begin(), bearer.end(), authorization.begin(),
                 [](char want, char got) { return want == std::tolower(static_cast<unsigned char>(got)); });
  if (is_bearer) {
    const size_t key = authorization.find_first_not_of(' ', bearer.size());
    return key == std::string::npos ? std::string() : authorization.substr(key);
  }
  return req.get_header_value("X-Api-Key");
}

// The chat page: revalidated on every load (no-cache) against its ETag, so a browser never keeps
// the page of an older binary, and answered 304 when it has this one.
void send_chat_page(const httplib::Request& req, httplib::Response& res) {
  const ChatPage& page = chat_page();
  res.set_header("Content-Security-Policy", std::string(page.content_security_policy));
  res.set_header("X-Content-Type-Options", "nosniff");
  res.set_header("Referrer-Policy", "no-referrer");
  res.set_header("Cache-Control", "no-cache");
  res.set_header("ETag", std::string(page.etag));
  if (req.get_header_value("If-None-Match").find(page.etag) != std::string::npos) {
    res.status = 304;
    return;
  }
  res.set_content(page.html.data(), page.html.size(), "text/html; charset=utf-8");
}

// What may be fetched without the API key: /health, which load balancers probe, and the chat page,
// which holds nothing secret and asks for the key itself (as llama-server's page does).
bool open_without_key(const httplib::Request& req) {
  return req.path == "/health" || (req.path == "/" && (req.method == "GET" || req.method == "HEAD"));
}

int64_t unix_now() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace

// The events of one request, handed from the scheduler thread to the connection's thread.
struct HttpServer::Stream {
  std::mutex mutex;
  std::condition_variable ready;
  std::deque<ServeEvent> events;
  bool ended = false;  // a Done or Error event has been queued
  bool gone = false;   // the connection is finished with this request (the sink refuses events)
  // For the request's log line: tokens generated so far, and the Done event's usage.
  int64_t generated = 0, cached = 0;

  bool push(const ServeEvent& event) {
    {
      std::lock_guard lock(mutex);
      if (gone) return false;
      events.push_back(event);
      if (event.kind != ServeEvent::Kind::Token) ended = true;
      if (event.kind == ServeEvent::Kind::Token) ++generated;
      if (event.kind == ServeEvent::Kind::Done) {
        generated = event.completion_tokens;
        cached = event.cached_tokens;
      }
    }
    ready.notify_one();
    return true;
  }
  // Waits up to `timeout` for events and takes them all.
  std::vector<ServeEvent> take(std::chrono::milliseconds timeout) {
    std::unique_lock lock(mutex);
    ready.wait_for(lock, timeout, [&] { return !events.empty(); });
    std::vector<ServeEvent> taken(std::make_move_iterator(events.begin()),
                                  std::make_move_iterator(events.end()));
    events.clear();
    return taken;
  }
  void abandon() {
    std::lock_guard lock(mutex);
    gone = true;
    events.clear();
  }
};

// One line on stderr per generation request once it has ended, as llama-server logs its requests:
// the response id (the "id" its client got), the client (the forwarded one behind a trusted
// proxy), the status, the prompt's tokens and how many came from a cached state, the tokens
// generated and the time from arrival to the end. One fprintf, so lines of concurrent requests
// never interleave.
struct HttpServer::RequestLog {
  std::string id, client, method, path;
  std::chrono::steady_clock::time_point arrived = std::chrono::steady_clock::now();
  int64_t prompt_tokens = 0;
  int status = 0;  // a plain request's, once known

  bool enabled = true;  // ServerOptions::log_requests

  void write(int code, int64_t cached, int64_t generated, const char* note = "") const {
    if (!enabled) return;
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - arrived).count();
    std::fprintf(stderr,
                 "mambacpp serve: request %s from %s: %s %s %d, %lld prompt tokens (%lld cached), "
                 "%lld generated, %.3f s%s\n",
                 id.c_str(), client.c_str(), method.c_str(), path.c_str(), code,
                 static_cast<long long>(prompt_tokens), static_cast<long long>(cached),
                 static_cast<long long>(generated), seconds, note);
  }
};

namespace {

// Each request being answered holds a worker for as long as it streams, so there are enough
// workers for every slot and every queued request, plus a few for /health and /metrics; a
// connection that waits for its request holds none.
ConnectionLimits connection_limits(const ServerOptions& options) {
  ConnectionLimits limits;
  // Descriptors beyond the connections: the model's files, state files, the listening socket.
  constexpr size_t kReservedDescriptors = 192;
  const size_t open_files = std::max(raise_open_file_limit(), kReservedDescriptors + 64);
  limits.max_connections = std::min(options.max_connections > 0 ? options.max_connections : 4096,
                                    open_files - kReservedDescriptors);
  for (const std::string& proxy : options.trusted_proxies) {
    try {
      limits.trusted_proxies.push_back(parse_address_range(proxy));
    } catch (const Error& e) {
      throw Error(std::string("--trusted-proxy: ") + e.what());
    }
  }
  limits.read_timeout_seconds = options.read_timeout_seconds;
  limits.write_timeout_seconds = options.timeout_seconds;
  limits.max_body_bytes = options.max_body_bytes;
  limits.max_connections_per_ip = options.max_connections_per_ip;
  limits.workers = options.http_threads > 0 ? static_cast<size_t>(options.http_threads) : 64;
  return limits;
}

}  // namespace

std::string HttpServer::layer_error_body(int status) const {
  std::string message;
  if (status == 413)
    message = "the request body is larger than the server's limit (--max-body " +
              std::to_string(options_.max_body_bytes) + " bytes)";
  else if (status == 408)
    message = "the request did not arrive within --read-timeout " +
              std::to_string(options_.read_timeout_seconds) + " s";
  else if (status == 411)
    message = "the request body must be sent with a Content-Length (Transfer-Encoding is not accepted)";
  else if (status == 417)
    message = "the only expectation this server meets is 'Expect: 100-continue'";
  else if (status == 431)
    message = "the request headers are larger than 64 KiB";
  else if (status == 429)
    message = "too many requests in flight from this client address (--max-conns-per-ip " +
              std::to_string(options_.max_connections_per_ip) + ")";
  else
    message = "malformed request (Content-Length must be one decimal number)";
  return error_json(message, error_type_for_status(status));
}

namespace {

// "[::1]" is how a URL spells an IPv6 host; the socket calls take "::1".
ServerOptions without_brackets(ServerOptions options) {
  std::string& host = options.host;
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  return options;
}

}  // namespace

HttpServer::HttpServer(ServerOptions options)
    : options_(without_brackets(std::move(options))),
      http_(std::make_unique<ConnectionServer>(connection_limits(options_),
                                               [this](int status) { return layer_error_body(status); })),
      started_unix_(unix_now()) {
  std::random_device device;
  seed_state_ = (static_cast<uint64_t>(device()) << 32) ^ device();
  http_->set_payload_max_length(options_.max_body_bytes);
  // httplib sends a response's headers and its body in two writes; with Nagle's algorithm the
  // second waits for the client's delayed ACK of the first, 40 ms on Linux, on every other request
  // of a keep-alive connection. The accepted sockets inherit TCP_NODELAY from the listening one.
  http_->set_tcp_nodelay(true);
  // httplib closes a connection after five requests by default, which ends a pipeline of more
  // unanswered past the fifth and makes a proxy reconnect every five requests; nginx's default.
  http_->set_keep_alive_max_count(1000);
  // httplib's default sets SO_REUSEPORT, which lets a second server bind a port that is in use
  // and quietly take half of its connections; SO_REUSEADDR alone still allows a restart while
  // the old connections linger in TIME_WAIT, and a busy port is an error.
  http_->set_socket_options([](socket_t sock) {
    int yes = 1;
    setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
  });
  register_routes();
}

HttpServer::~HttpServer() {
  stop();
}

uint64_t HttpServer::next_seed() {
  std::lock_guard lock(mutex_);
  // splitmix64: well-spread seeds from one random start.
  uint64_t z = (seed_state_ += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

void HttpServer::count(uint64_t HttpCounters::*counter) {
  std::lock_guard lock(mutex_);
  ++(counters_.*counter);
}

void HttpServer::register_routes() {
  httplib::Server& http = *http_;
  // The API key guards every endpoint but /health and the chat page.
  http.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
    if (options_.api_key.empty() || open_without_key(req)) return httplib::Server::HandlerResponse::Unhandled;
    if (same_secret(api_key_of(req), options_.api_key)) return httplib::Server::HandlerResponse::Unhandled;
    count(&HttpCounters::requests_unauthorized);
    send_error(res, 401,
               "invalid or missing API key (send it as 'Authorization: Bearer KEY' or 'x-api-key: KEY')",
               "invalid_api_key");
    res.set_header("WWW-Authenticate", "Bearer");
    return httplib::Server::HandlerResponse::Handled;
  });
  // Errors httplib produces itself (unknown paths, oversize bodies) get OpenAI's error shape too.
  http.set_error_handler(
      httplib::Server::HandlerWithResponse([this](const httplib::Request& req, httplib::Response& res) {
        if (!res.body.empty()) return httplib::Server::HandlerResponse::Unhandled;
        std::string message;
        if (res.status == 413)
          message = "the request body is larger than the server's limit (--max-body " +
                    std::to_string(options_.max_body_bytes) + " bytes)";
        else if (res.status == 404)
          message = "no such endpoint: " + req.method + " " + req.path;
        else
          message = "HTTP error " + std::to_string(res.status) + " for " + req.method + " " + req.path;
        send_error(res, res.status, message);
        return httplib::Server::HandlerResponse::Handled;
      }));
  http.set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr error) {
    std::string message = "internal error";
    try {
      std::rethrow_exception(error);
    } catch (const std::exception& e) {
      message = std::string("internal error: ") + e.what();
    } catch (...) {
    }
    send_error(res, 500, message);
  });

  http.Get("/health", [this](const httplib::Request&, httplib::Response& res) {
    if (!ready_.load(std::memory_order_acquire)) {
      res.status = 503;
      res.set_header("Retry-After", "1");
      res.set_content(R"({"status":"loading"})", kJson);
      return;
    }
    res.set_content(R"({"status":"ok"})", kJson);
  });
  // The page is there while the model loads; it waits for /v1/models to answer.
  http.Get("/", send_chat_page);
  const auto when_ready = [this](auto handler) {
    return [this, handler](const httplib::Request& req, httplib::Response& res) {
      if (!ready_.load(std::memory_order_acquire)) {
        res.set_header("Retry-After", "1");
        return send_error(res, 503, "the model is still loading", "loading");
      }
      try {
        handler(req, res);
      } catch (const ApiError& e) {
        send_api_error(res, e);
      } catch (const Error& e) {
        send_error(res, 400, e.what());
      }
    };
  };
  http.Get("/v1/models", when_ready([this](const httplib::Request&, httplib::Response& res) {
             json body = models_response(options_.model_id, started_unix_, options_.defaults.max_context);
             add_embeddings_meta(body, model_.embeddings, model_.pooling);
             send_json(res, body);
           }));
  http.Post("/v1/embeddings", when_ready([this](const httplib::Request& req, httplib::Response& res) {
              send_json(res, handle_embeddings(req));
            }));
  http.Post("/tokenize", when_ready([this](const httplib::Request& req, httplib::Response& res) {
              send_json(res, tokenize_response(parse_request_body(req.body), *model_.tokenizer));
            }));
  http.Post("/detokenize", when_ready([this](const httplib::Request& req, httplib::Response& res) {
              send_json(res, detokenize_response(parse_request_body(req.body), *model_.tokenizer));
            }));
  http.Get("/metrics", when_ready([this](const httplib::Request&, httplib::Response& res) {
             HttpCounters counters;
             {
               std::lock_guard lock(mutex_);
               counters = counters_;
             }
             res.set_content(prometheus_metrics(model_.scheduler->metrics(), counters),
                             "text/plain; version=0.0.4; charset=utf-8");
           }));
  http.Post("/v1/completions", when_ready([this](const httplib::Request& req, httplib::Response& res) {
              handle_generation(ApiKind::Completion, req, res);
            }));
  http.Post("/v1/chat/completions", when_ready([this](const httplib::Request& req, httplib::Response& res) {
              handle_generation(ApiKind::Chat, req, res);
            }));
  register_agent_routes();
}

void HttpServer::handle_generation(ApiKind kind, const httplib::Request& req, httplib::Response& res) {
  run_generation(
      response_id(kind, next_seed()),
      [&](const std::string& id) {
        Generation generation;
        generation.request =
            prepare_api_request(kind, req.body, *model_.tokenizer, model_.chat, options_.defaults,
                                next_seed(), options_.model_id, model_.trie);
        generation.formatter = completions_formatter(generation.request, *model_.tokenizer, id, unix_now());
        return generation;
      },
      req, res);
}

void HttpServer::run_generation(const std::string& response_id, const GenerationPreparer& prepare,
                                const httplib::Request& req, httplib::Response& res) {
  count(&HttpCounters::requests_total);
  auto log = std::make_shared<RequestLog>();
  log->enabled = options_.log_requests;
  log->id = response_id;
  log->client = req.remote_addr;
  log->method = req.method;
  log->path = req.path;
  if (draining_.load()) {
    res.set_header("Retry-After", "5");
    send_error(res, 503, "the server is shutting down", "shutting_down");
    return log->write(503, 0, 0);
  }
  ApiRequest request;
  std::shared_ptr<ApiFormatter> formatter;
  try {
    Generation generation = prepare(log->id);
    request = std::move(generation.request);
    formatter = std::move(generation.formatter);
  } catch (const ApiError& e) {
    count(&HttpCounters::requests_rejected);
    log->write(e.status, 0, 0);
    throw;
  } catch (const Error&) {
    count(&HttpCounters::requests_rejected);
    log->write(400, 0, 0);
    throw;
  }
  log->prompt_tokens = static_cast<int64_t>(request.serve.prompt.size());

  auto stream = std::make_shared<Stream>();
  RequestId id = 0;
  {
    // Counted before submit, so drain() cannot miss a request the scheduler already holds.
    std::lock_guard lock(mutex_);
    ++in_flight_;
  }
  const auto finish = [this] {
    std::lock_guard lock(mutex_);
    --in_flight_;
    idle_.notify_all();
  };
  try {
    id = model_.scheduler->submit(std::move(request.serve),
                                  [stream](const ServeEvent& event) { return stream->push(event); });
  } catch (const QueueFull& e) {
    finish();
    count(&HttpCounters::queue_full);
    res.set_header("Retry-After", "1");
    send_error(res, 503, e.what(), "queue_full");
    return log->write(503, 0, 0);
  } catch (const Error& e) {
    finish();
    count(&HttpCounters::requests_rejected);
    send_error(res, 400, e.what());
    return log->write(400, 0, 0);
  }

  // A failed write or a socket found closed means the client is gone: the provider returns false,
  // httplib closes the connection and calls the releaser, which cancels the request so its slot
  // is free at the next step. The log line is written there, when the request has ended.
  const auto release = [this, stream, formatter, id, finish, log](bool) {
    stream->abandon();
    const bool gone = !formatter->finished();
    if (gone) {
      model_.scheduler->cancel(id);
      count(&HttpCounters::client_disconnects);
    }
    finish();
    std::lock_guard lock(stream->mutex);
    // A stream's status went out with its first bytes; a plain request's is set before this.
    log->write(log->status != 0 ? log->status : 200, stream->cached, stream->generated,
               gone ? " (the client went away)" : "");
  };

  if (!request.stream) {
    // A plain request is answered once it has ended, with its status and a Content-Length, so an
    // error (a failed forward, a shutdown) gets its own status and every client, HTTP/1.0 ones
    // too, can read the body. Until then the connection is watched, so a client that hangs up
    // while it waits frees its slot as a streaming one does.
    while (!formatter->finished()) {
      for (const ServeEvent& event : stream->take(kStreamPoll)) formatter->collect(event);
      if (!formatter->finished() && !ConnectionServer::client_connected()) break;
    }
    if (!formatter->finished()) {
      send_error(res, 499, "the client closed the connection");
    } else {
      try {
        send_json(res, formatter->response());
      } catch (const ApiError& e) {
        send_api_error(res, e);
      }
    }
    log->status = res.status;
    release(true);
    return;
  }

  res.set_header("Cache-Control", "no-cache");
  auto prelude_sent = std::make_shared<bool>(false);
  httplib::ContentProviderWithoutLength provider = [stream, formatter, prelude_sent](
                                                       size_t, httplib::DataSink& sink) {
    const auto write = [&](const std::string& text) {
      return text.empty() || sink.write(text.data(), text.size());
    };
    if (!*prelude_sent) {
      *prelude_sent = true;
      if (!write(formatter->stream_prelude())) return false;
    }
    // Runs until the request ends or the client goes.
    while (!formatter->finished()) {
      const std::vector<ServeEvent> events = stream->take(kStreamPoll);
      if (events.empty() && !sink.is_writable()) return false;
      for (const ServeEvent& event : events)
        if (!write(formatter->stream_event(event))) return false;
    }
    sink.done();
    return true;
  };
  // HTTP/1.0 has no chunked encoding: its stream ends when the connection closes (the
  // connection layer closes every HTTP/1.0 connection after its response).
  if (req.version == "HTTP/1.0")
    res.set_content_provider("text/event-stream", std::move(provider), release);
  else
    res.set_chunked_content_provider("text/event-stream", std::move(provider), release);
}

void HttpServer::bind() {
  if (options_.port == 0) {
    port_ = http_->bind_to_any_port(options_.host);
    if (port_ < 0) port_ = 0;
  } else if (http_->bind_to_port(options_.host, options_.port)) {
    port_ = options_.port;
  }
  if (port_ <= 0)
    throw Error("cannot listen on " + options_.host + ":" + std::to_string(options_.port) +
                " (address in use, or not an address of this machine)");
  static_cast<ConnectionServer&>(*http_).widen_backlog(SOMAXCONN);
}

std::string HttpServer::url() const {
  const bool ipv6 = options_.host.find(':') != std::string::npos;
  return "http://" + (ipv6 ? "[" + options_.host + "]" : options_.host) + ":" + std::to_string(port_);
}

void HttpServer::start() {
  listener_ = std::thread([this] {
    http_->listen_after_bind();
    listener_done_.store(true);
  });
  // httplib's stop() does nothing until the listener has marked itself running, so a stop() that
  // came first (a model that fails to load at once) would leave the listener in accept() and
  // the destructor waiting for it forever: start() returns only once stop() can reach it.
  while (!http_->is_running() && !listener_done_.load())
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
}

void HttpServer::set_model(ServedModel model) {
  model_ = std::move(model);
  // Built once here (a pass over the vocabulary), shared read-only by every grammar request.
  if (!model_.trie && model_.tokenizer != nullptr)
    model_.trie = std::make_shared<const TokenTrie>(*model_.tokenizer);
  options_.defaults.vocab_size = model_.vocab_size;
  options_.defaults.max_context = model_.max_context;
  ready_.store(true, std::memory_order_release);
}

bool HttpServer::drain(std::chrono::milliseconds timeout) {
  draining_.store(true);
  std::unique_lock lock(mutex_);
  return idle_.wait_for(lock, timeout, [&] { return in_flight_ == 0; });
}

void HttpServer::stop() {
  if (!http_) return;
  http_->stop();
  if (listener_.joinable()) listener_.join();
  static_cast<ConnectionServer&>(*http_).shutdown_connections();
}

}  // namespace mb::server

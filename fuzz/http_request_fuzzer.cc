// SPDX-License-Identifier: MIT
// Fuzzes the HTTP server (src/server) with the raw bytes of one client connection. Each input
// is first checked against the connection layer's pure header scanner (scan_request), whose
// answer decides how the poller frames requests, then sent to a real HttpServer on loopback,
// which serves a tiny model: cpp-httplib's parser, the connection layer, routing, the OpenAI
// request parsing and the generation itself all run on the fuzzer's bytes.
//
// The server is started once, with small limits (128 tokens of context, an 8 KiB body, 1 s read
// and write timeouts, no API key so that every handler is reachable), so that one input takes
// milliseconds. Per input the harness connects, sends the bytes and reads until the server
// closes. When the bytes frame into whole requests only, a last "Connection: close" request is
// appended, so the client stays connected while the server answers (a generation runs to its
// end); otherwise the client half-closes after sending, and the server answers what is complete
// and closes. It aborts when the server does not close the connection within 5 s, when an
// exception escapes a handler (500 "internal error") or when /health stops answering 200
// afterwards.
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <string_view>
#include <thread>

#include "chat/chat_template.h"
#include "core/threading.h"
#include "engine/scheduler.h"
#include "fuzz_support.h"
#include "model/make_model.h"
#include "model/model.h"
#include "server/connections.h"
#include "server/http_server.h"
#include "tokenizer/tokenizer.h"

namespace {

using mb::server::RequestScan;
using Clock = std::chrono::steady_clock;

constexpr size_t kMaxBody = 8192;
constexpr size_t kMaxHeaderBytes = 64u << 10;  // connections.cc's limit on a request's headers
constexpr auto kCloseDeadline = std::chrono::seconds(5);
constexpr std::string_view kLastRequest = "GET /health HTTP/1.1\r\nHost: fuzz\r\nConnection: close\r\n\r\n";
// The body send_error gives an exception that escaped a handler (nlohmann sorts the keys).
constexpr std::string_view kInternalError = R"({"error":{"code":null,"message":"internal error)";

[[noreturn]] void fail(const char* what) {
  std::fprintf(stderr, "http_request_fuzzer: %s\n", what);
  std::abort();
}

void expect(bool holds, const char* what) {
  if (!holds) fail(what);
}

bool same_name(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (std::tolower(static_cast<unsigned char>(a[i])) != std::tolower(static_cast<unsigned char>(b[i])))
      return false;
  return true;
}

// What scan_request says must agree with the bytes: the poller hands a worker exactly
// header_bytes + body_bytes of a Complete request, and waits for more otherwise.
void check_scan(std::string_view bytes, size_t limit) {
  const RequestScan scan = mb::server::scan_request(bytes, limit);
  const size_t blank = bytes.find("\r\n\r\n");
  const bool headers = scan.header_bytes > 0;
  expect(scan.header_bytes <= bytes.size() && scan.header_bytes <= kMaxHeaderBytes,
         "header_bytes lies past the input or the header limit");
  expect(!headers || blank + 4 == scan.header_bytes, "header_bytes does not end at the first blank line");
  expect(headers || scan.body_bytes == 0, "a body length without headers");
  using State = RequestScan::State;
  switch (scan.state) {
    case State::Incomplete:
      expect(headers ? scan.body_bytes <= limit && bytes.size() < scan.header_bytes + scan.body_bytes
                     : blank == std::string_view::npos && bytes.size() <= kMaxHeaderBytes,
             "Incomplete for a request that is all there, or too large");
      break;
    case State::Complete:
      expect(headers && scan.body_bytes <= limit && scan.header_bytes + scan.body_bytes <= bytes.size(),
             "Complete for a request that is not all there or over the limit");
      break;
    case State::ContinueThenBody: {
      const size_t begin = scan.expect_line_begin, end = scan.expect_line_end;
      expect(headers && scan.body_bytes <= limit && begin >= 2 && begin + 21 <= end &&
                 end + 2 <= scan.header_bytes,
             "ContinueThenBody with an Expect line outside the headers, or over the limit");
      expect(bytes.substr(begin - 2, 2) == "\r\n" && bytes.substr(end - 2, 2) == "\r\n" &&
                 same_name(bytes.substr(begin, 7), "expect:"),
             "ContinueThenBody names a span that is not an Expect header line");
      break;
    }
    case State::TooLarge:
      expect(headers && scan.body_bytes > limit, "TooLarge for a body within the limit");
      break;
    case State::HeadersTooLarge:
      expect(!headers && (blank == std::string_view::npos ? bytes.size() > kMaxHeaderBytes
                                                          : blank + 4 > kMaxHeaderBytes),
             "HeadersTooLarge for headers within the limit");
      break;
    case State::BadLength:
    case State::LengthRequired:
    case State::ExpectationFailed:
      expect(headers, "a refusal decided before the headers ended");
      break;
  }
  // The poller scans whatever has arrived, so a prefix must never be decided differently.
  if (headers && scan.state != State::Incomplete)
    expect(mb::server::scan_request(bytes.substr(0, scan.header_bytes - 1), limit).state == State::Incomplete,
           "a prefix without the blank line is not Incomplete");
  if (scan.state == State::Complete) {
    const RequestScan exact =
        mb::server::scan_request(bytes.substr(0, scan.header_bytes + scan.body_bytes), limit);
    expect(exact.state == State::Complete && exact.header_bytes == scan.header_bytes &&
               exact.body_bytes == scan.body_bytes,
           "the request alone is framed differently from the request with bytes after it");
    if (scan.body_bytes > 0)
      expect(
          mb::server::scan_request(bytes.substr(0, scan.header_bytes + scan.body_bytes - 1), limit).state ==
              State::Incomplete,
          "a request one byte short of its body is not Incomplete");
  }
}

// Frames `bytes` as the poller does (erasing the Expect line it answers with "100 Continue");
// returns whether they are whole requests only, each checked with check_scan.
bool whole_requests_only(std::string bytes) {
  while (!bytes.empty()) {
    check_scan(bytes, kMaxBody);
    const RequestScan scan = mb::server::scan_request(bytes, kMaxBody);
    if (scan.state == RequestScan::State::Complete)
      bytes.erase(0, scan.header_bytes + scan.body_bytes);
    else if (scan.state == RequestScan::State::ContinueThenBody)
      bytes.erase(scan.expect_line_begin, scan.expect_line_end - scan.expect_line_begin);
    else
      return false;
  }
  return true;
}

// The served model and the server, built once and never destroyed while the fuzzer runs (they
// are reachable from here, so LeakSanitizer does not count them); stopped at exit.
struct Served {
  std::unique_ptr<mb::Model> model;
  std::unique_ptr<mb::Tokenizer> tokenizer;
  std::unique_ptr<mb::Scheduler> scheduler;
  std::unique_ptr<mb::server::HttpServer> http;
};
Served* served = nullptr;

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  std::ostringstream text;
  text << in.rdbuf();
  if (!in) fail("cannot read the chat template");
  return text.str();
}

void start_server() {
  const std::string dir = mb::fuzz::scratch_dir() + "/model";
  mb::MakeModelOptions model_options;
  model_options.config = mb::fuzz::tiny_model_config();
  model_options.write_tokenizer = true;  // a byte-level tokenizer.json
  mb::make_model(dir, model_options);

  auto* s = new Served;
  s->model = mb::Model::load(dir);
  s->tokenizer = std::make_unique<mb::Tokenizer>(mb::Tokenizer::from_model_dir(dir));

  mb::server::ServerOptions options;
  options.port = 0;
  options.timeout_seconds = 1;
  options.read_timeout_seconds = 1;
  options.max_body_bytes = kMaxBody;
  options.http_threads = 4;
  options.model_id = "fuzz";
  options.log_requests = false;  // a line per input would bury libFuzzer's own output
  options.defaults.max_context = 128;
  options.defaults.completion_max_tokens = 4;
  s->http = std::make_unique<mb::server::HttpServer>(options);
  s->http->bind();
  s->http->start();

  mb::SchedulerOptions scheduler_options;
  scheduler_options.max_active = 2;
  scheduler_options.step_token_budget = 64;
  scheduler_options.max_waiting = 4;
  scheduler_options.max_context = 128;
  scheduler_options.cache_every = 8;
  scheduler_options.cache_bytes = 1u << 20;
  s->scheduler =
      std::make_unique<mb::Scheduler>(*s->model, s->tokenizer.get(), mb::ComputeContext{}, scheduler_options);
  s->scheduler->start();

  mb::server::ServedModel model;
  model.scheduler = s->scheduler.get();
  model.tokenizer = s->tokenizer.get();
  model.vocab_size = 0;  // as `serve`: Scheduler::submit checks prompt ids
  model.chat.chat_template =
      mb::ChatTemplate::parse(read_text(std::string(MB_FUZZ_TEST_DATA_DIR) + "/chat_templates/chatml.jinja"));
  s->http->set_model(std::move(model));
  served = s;
  // A clean stop, so that no server thread still runs while the process's statics are destroyed.
  std::atexit([] {
    served->scheduler->stop(false);
    served->http->stop();
  });
}

// Each input opens two connections, thousands a second, so the loopback's ephemeral ports can run
// short for a moment (EADDRNOTAVAIL): such transient failures are retried for up to a second. A
// refused connection means the listener is gone, which is a failure.
int connect_to_server() {
  for (int attempt = 0;; ++attempt) {
    const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) fail("socket() failed");
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_port = htons(static_cast<uint16_t>(served->http->bound_port()));
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0) return fd;
    const int error = errno;
    close(fd);
    const bool transient = error == EADDRNOTAVAIL || error == EAGAIN || error == EINTR || error == ETIMEDOUT;
    if (!transient || attempt == 50) {
      const std::string message = std::string("cannot connect to the server: ") + std::strerror(error);
      fail(message.c_str());
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

// Sends what the server takes; it may close first (a "Connection: close" request, a refusal).
void send_bytes(int fd, std::string_view bytes) {
  while (!bytes.empty()) {
    pollfd p{fd, POLLOUT, 0};
    if (poll(&p, 1, 1000) <= 0 || !(p.revents & POLLOUT)) return;
    const ssize_t n = send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0 && errno != EAGAIN && errno != EINTR) return;
    if (n > 0) bytes.remove_prefix(static_cast<size_t>(n));
  }
}

// Everything the server sends until it closes (or resets) the connection; aborts past the deadline.
std::string receive_until_closed(int fd) {
  std::string received;
  const auto deadline = Clock::now() + kCloseDeadline;
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) fail("the server did not close the connection within 5 s");
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, static_cast<int>(left)) <= 0) continue;
    char chunk[16384];
    const ssize_t n = recv(fd, chunk, sizeof chunk, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return received;
    received.append(chunk, static_cast<size_t>(n));
  }
}

void check_alive() {
  const int fd = connect_to_server();
  send_bytes(fd, kLastRequest);
  const std::string reply = receive_until_closed(fd);
  close(fd);
  if (reply.rfind("HTTP/1.1 200 ", 0) != 0) fail("the server no longer answers /health with 200");
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  // The harness's own writes to a connection the server has closed must not end the process.
  std::signal(SIGPIPE, SIG_IGN);
  start_server();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  check_scan(input, kMaxBody);
  check_scan(input, SIZE_MAX);
  const bool whole = whole_requests_only(std::string(input));

  const int fd = connect_to_server();
  send_bytes(fd, input);
  if (whole)
    send_bytes(fd, kLastRequest);
  else
    shutdown(fd, SHUT_WR);
  const std::string reply = receive_until_closed(fd);
  close(fd);
  // For replaying an input by hand: MB_FUZZ_HTTP_VERBOSE=1 prints what the server answered.
  static const bool verbose = std::getenv("MB_FUZZ_HTTP_VERBOSE") != nullptr;
  if (verbose)
    std::fprintf(stderr, "--- %s reply:\n%s\n", whole ? "kept open" : "half-closed", reply.c_str());
  expect(reply.empty() || reply.rfind("HTTP/1.1 ", 0) == 0, "the server's reply is not an HTTP/1.1 response");
  expect(reply.find(kInternalError) == std::string::npos,
         "an exception escaped a handler (500 internal error)");
  check_alive();
  return 0;
}

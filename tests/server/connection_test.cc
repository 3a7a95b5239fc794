// SPDX-License-Identifier: MIT
// The connection layer of `mambacpp serve` (src/server/connections.h) over raw loopback sockets
// (issue 21): idle connections that starve nobody, answers decided from the headers alone,
// pipelining of every kind of request, HTTP/1.0, and a plain request that ends in an error during
// a shutdown.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <nlohmann/json.hpp>
#include <thread>
#include <utility>
#include <vector>

#include "server/connections.h"
#include "server_process.h"
#include "socket_util.h"

namespace mb {
namespace {

using nlohmann::json;
using server::RequestScan;
using server::scan_request;
using test::closed_by_server;
using test::connect_from;
using test::receive;
using test::send_all;
using test::server_test_model;
using test::ServerProcess;
using Clock = std::chrono::steady_clock;

std::string post(const std::string& version, const std::string& path, const std::string& body,
                 const std::string& extra_headers = "") {
  return "POST " + path + " " + version +
         "\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) +
         "\r\n" + extra_headers + "\r\n" + body;
}

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

TEST(RequestScan, DecidesFromTheHeadersAlone) {
  const size_t limit = 100;
  EXPECT_EQ(scan_request("GET / HTTP/1.1\r\nHost: x\r\n", limit).state, RequestScan::State::Incomplete);
  const RequestScan get = scan_request("GET / HTTP/1.1\r\nHost: x\r\n\r\nGET", limit);
  EXPECT_EQ(get.state, RequestScan::State::Complete);
  EXPECT_EQ(get.header_bytes, 27u);
  EXPECT_EQ(scan_request("POST / HTTP/1.1\r\ncontent-length: 5\r\n\r\nabc", limit).state,
            RequestScan::State::Incomplete);
  EXPECT_EQ(scan_request("POST / HTTP/1.1\r\ncontent-length: 5\r\n\r\nabcde", limit).body_bytes, 5u);
  EXPECT_EQ(scan_request("POST / HTTP/1.1\r\nContent-Length: 1000000000000\r\n\r\n", limit).state,
            RequestScan::State::TooLarge);
  EXPECT_EQ(
      scan_request("POST / HTTP/1.1\r\nContent-Length: 101\r\nExpect: 100-continue\r\n\r\n", limit).state,
      RequestScan::State::TooLarge);
  const std::string expecting = "POST / HTTP/1.1\r\nExpect: 100-Continue\r\nContent-Length: 4\r\n\r\n";
  const RequestScan expect = scan_request(expecting, limit);
  EXPECT_EQ(expect.state, RequestScan::State::ContinueThenBody);
  EXPECT_EQ(expecting.substr(expect.expect_line_begin, expect.expect_line_end - expect.expect_line_begin),
            "Expect: 100-Continue\r\n");
  EXPECT_EQ(scan_request("POST / HTTP/1.1\r\nExpect: magic\r\n\r\n", limit).state,
            RequestScan::State::ExpectationFailed);
  EXPECT_EQ(scan_request("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n", limit).state,
            RequestScan::State::LengthRequired);
  for (const char* length : {"-1", "1e3", "", "12 3", "99999999999999999999"})
    EXPECT_EQ(
        scan_request(std::string("POST / HTTP/1.1\r\nContent-Length: ") + length + "\r\n\r\n", limit).state,
        RequestScan::State::BadLength)
        << length;
  EXPECT_EQ(scan_request("POST / HTTP/1.1\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\n", limit).state,
            RequestScan::State::BadLength);
  EXPECT_EQ(scan_request("GET / HTTP/1.1\r\nX: " + std::string(70000, 'a'), limit).state,
            RequestScan::State::HeadersTooLarge);
}

// Slowloris: connections that send one byte and then nothing used to hold every HTTP thread (76)
// until the 600 s timeout. Now they hold none, one address may hold only --max-conns-per-ip of
// them, they get 408 after --read-timeout, and a 413 needs no body.
TEST(ServeConnections, IdleConnectionsStarveNobody) {
  // 10 workers; 100 idle connections from one address, 40 more refused.
  ServerProcess server(server_test_model(),
                       "-t 1 -np 1 --max-queue 1 --max-conns-per-ip 100 --read-timeout 2");
  ASSERT_GT(server.port(), 0);
  std::vector<int> idle;
  for (int i = 0; i < 140; ++i) {
    const int fd = connect_from("127.0.0.2", server.port());
    ASSERT_GE(fd, 0);
    ASSERT_TRUE(send_all(fd, "P"));
    idle.push_back(fd);
  }
  const auto start = Clock::now();
  httplib::Client client("127.0.0.1", server.port());
  client.set_read_timeout(5, 0);
  const auto health = client.Get("/health");
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 200);
  const auto completion = client.Post(
      "/v1/completions", R"({"prompt": "hi", "max_tokens": 2, "ignore_eos": true})", "application/json");
  ASSERT_TRUE(completion);
  EXPECT_EQ(completion->status, 200) << completion->body;
  EXPECT_LT(seconds_since(start), 1.0);

  // A body of a terabyte announced and never sent: 413 at once.
  const int large = connect_from("127.0.0.1", server.port());
  ASSERT_TRUE(send_all(large, "POST /v1/completions HTTP/1.1\r\nContent-Length: 1000000000000\r\n\r\n"));
  const auto asked = Clock::now();
  const std::string refused = receive(large, 5);
  EXPECT_LT(seconds_since(asked), 1.0);
  EXPECT_EQ(refused.rfind("HTTP/1.1 413", 0), 0u) << refused;
  EXPECT_NE(refused.find("--max-body"), std::string::npos) << refused;
  close(large);

  int closed = 0;
  for (int fd : idle) closed += closed_by_server(fd);
  EXPECT_EQ(closed, 40);
  // Past --read-timeout the others are answered 408 and closed.
  std::this_thread::sleep_for(std::chrono::milliseconds(2500));
  const std::string timed_out = receive(idle[0], 2);
  EXPECT_EQ(timed_out.rfind("HTTP/1.1 408", 0), 0u) << timed_out;
  closed = 0;
  for (int fd : idle) {
    closed += closed_by_server(fd);
    close(fd);
  }
  EXPECT_EQ(closed, 140);
  EXPECT_EQ(server.terminate(), 0);
}

TEST(ServeConnections, PipelinedRequestsAreAllAnswered) {
  ServerProcess server(server_test_model(), "-t 1");
  ASSERT_GT(server.port(), 0);
  const int fd = connect_from("127.0.0.1", server.port());
  const std::string tokenize = post("HTTP/1.1", "/tokenize", R"({"content": "hi"})");
  ASSERT_TRUE(send_all(fd, "GET /health HTTP/1.1\r\nHost: x\r\n\r\n" + tokenize +
                               "GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"));
  const std::string replies = receive(fd, 5);
  close(fd);
  size_t count = 0;
  for (size_t at = replies.find("HTTP/1.1 200"); at != std::string::npos;
       at = replies.find("HTTP/1.1 200", at + 1))
    ++count;
  EXPECT_EQ(count, 3u) << replies;
  EXPECT_NE(replies.find("\"tokens\""), std::string::npos) << replies;
  EXPECT_EQ(server.terminate(), 0);
}

// Twenty requests in one write on one connection (L5): every one is answered, in order. httplib's
// default of five requests a connection used to close it after the fifth answer, and the other
// fifteen were never answered (a client must then send them again, which few do for a pipeline).
TEST(ServeConnections, TwentyPipelinedRequestsInOneWriteAreAllAnswered) {
  ServerProcess server(server_test_model(), "-t 1");
  ASSERT_GT(server.port(), 0);
  const int fd = connect_from("127.0.0.1", server.port());
  ASSERT_GE(fd, 0);
  std::string pipeline;
  for (int i = 0; i < 19; ++i)
    pipeline += i % 2 ? post("HTTP/1.1", "/tokenize", R"({"content": "hi"})")
                      : std::string("GET /health HTTP/1.1\r\nHost: x\r\n\r\n");
  pipeline += "GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
  ASSERT_TRUE(send_all(fd, pipeline));
  const std::string received = receive(fd, 10);
  close(fd);
  size_t answered = 0, tokens = 0;
  for (size_t at = received.find("HTTP/1.1 200"); at != std::string::npos;
       at = received.find("HTTP/1.1 200", at + 1))
    ++answered;
  for (size_t at = received.find("\"tokens\""); at != std::string::npos;
       at = received.find("\"tokens\"", at + 1))
    ++tokens;
  EXPECT_EQ(answered, 20u) << received;
  EXPECT_EQ(tokens, 9u);
  EXPECT_EQ(received.find("Connection: close"), received.rfind("Connection: close"))
      << "closed before the last";
  EXPECT_EQ(server.terminate(), 0);
}

// A client may half-close its side once it has sent its requests (`nc -N`, the HTTP request
// fuzzer). When the requests and the end of the stream arrived in one read, the connection used
// to be closed unanswered (3 of 5 tries); every request must be answered, then the connection
// closed.
TEST(ServeConnections, RequestsFollowedByAHalfCloseAreAnswered) {
  ServerProcess server(server_test_model(), "-t 1");
  ASSERT_GT(server.port(), 0);
  const std::string requests =
      "GET /health HTTP/1.1\r\nHost: x\r\n\r\n" + post("HTTP/1.1", "/tokenize", R"({"content": "hi"})");
  for (int attempt = 0; attempt < 20; ++attempt) {
    const int fd = connect_from("127.0.0.1", server.port());
    ASSERT_GE(fd, 0);
    ASSERT_TRUE(send_all(fd, requests));
    ASSERT_EQ(shutdown(fd, SHUT_WR), 0);
    const auto start = Clock::now();
    const std::string replies = receive(fd, 5);
    EXPECT_LT(seconds_since(start), 4.0) << "the server did not close the half-closed connection";
    close(fd);
    const size_t second = replies.find("HTTP/1.1 200", 1);
    EXPECT_EQ(replies.rfind("HTTP/1.1 200", 0), 0u) << attempt << ": " << replies;
    ASSERT_NE(second, std::string::npos) << attempt << ": " << replies;
    EXPECT_NE(replies.find("\"tokens\"", second), std::string::npos) << attempt << ": " << replies;
  }
  EXPECT_EQ(server.terminate(), 0);
}

// HTTP/1.0 has no chunked encoding: a plain answer has a Content-Length, a stream ends with the
// connection.
TEST(ServeConnections, Http10ClientsGetBodiesTheyCanRead) {
  ServerProcess server(server_test_model(), "-t 1");
  ASSERT_GT(server.port(), 0);
  const std::string body = R"({"prompt": "hi", "max_tokens": 3, "ignore_eos": true)";
  int fd = connect_from("127.0.0.1", server.port());
  ASSERT_TRUE(send_all(fd, post("HTTP/1.0", "/v1/completions", body + "}")));
  std::string reply = receive(fd, 10);
  close(fd);
  const size_t blank = reply.find("\r\n\r\n");
  ASSERT_NE(blank, std::string::npos) << reply;
  const std::string headers = reply.substr(0, blank);
  EXPECT_EQ(headers.find("chunked"), std::string::npos) << headers;
  EXPECT_NE(headers.find("Content-Length: " + std::to_string(reply.size() - blank - 4)), std::string::npos)
      << reply;
  EXPECT_EQ(json::parse(reply.substr(blank + 4))["usage"]["completion_tokens"], 3);

  fd = connect_from("127.0.0.1", server.port());
  ASSERT_TRUE(send_all(fd, post("HTTP/1.0", "/v1/completions", body + R"(, "stream": true})")));
  reply = receive(fd, 10);
  close(fd);
  EXPECT_EQ(reply.find("chunked"), std::string::npos) << reply;
  ASSERT_GE(reply.size(), 16u);
  EXPECT_NE(reply.find("data: [DONE]\n\n"), std::string::npos) << reply;
  EXPECT_EQ(reply.substr(reply.size() - 14), "data: [DONE]\n\n") << reply;
  EXPECT_EQ(server.terminate(), 0);
}

TEST(ServeConnections, ExpectContinueIsAnsweredFromTheHeaders) {
  ServerProcess server(server_test_model(), "-t 1 --max-body 4096");
  ASSERT_GT(server.port(), 0);
  // Too large: 413 at once, never "100 Continue".
  int fd = connect_from("127.0.0.1", server.port());
  ASSERT_TRUE(
      send_all(fd, "POST /tokenize HTTP/1.1\r\nExpect: 100-continue\r\nContent-Length: 100000\r\n\r\n"));
  std::string reply = receive(fd, 2, "\r\n\r\n");
  close(fd);
  EXPECT_EQ(reply.rfind("HTTP/1.1 413", 0), 0u) << reply;
  // Acceptable: 100, then the body, then the answer.
  const std::string body = R"({"content": "hi"})";
  fd = connect_from("127.0.0.1", server.port());
  ASSERT_TRUE(send_all(fd, "POST /tokenize HTTP/1.1\r\nExpect: 100-continue\r\nContent-Length: " +
                               std::to_string(body.size()) + "\r\nConnection: close\r\n\r\n"));
  reply = receive(fd, 2, "\r\n\r\n");
  EXPECT_EQ(reply, "HTTP/1.1 100 Continue\r\n\r\n");
  ASSERT_TRUE(send_all(fd, body));
  reply = receive(fd, 5);
  close(fd);
  EXPECT_EQ(reply.rfind("HTTP/1.1 200", 0), 0u) << reply;
  EXPECT_EQ(reply.find("100 Continue"), std::string::npos) << reply;
  EXPECT_EQ(server.terminate(), 0);
}

// One response of those a connection received: its status, headers and (de-chunked) body.
struct Reply {
  int status = 0;
  std::string headers;
  std::string body;
};

// The whole responses at the start of `bytes`, in order (a truncated last one is left out).
std::vector<Reply> split_replies(const std::string& bytes) {
  std::vector<Reply> replies;
  size_t at = 0;
  for (;;) {
    const size_t blank = bytes.find("\r\n\r\n", at);
    if (blank == std::string::npos || bytes.compare(at, 9, "HTTP/1.1 ") != 0) break;
    Reply reply;
    reply.status = std::stoi(bytes.substr(at + 9, 3));
    reply.headers = bytes.substr(at, blank + 2 - at);
    at = blank + 4;
    const size_t length = reply.headers.find("Content-Length: ");
    if (length != std::string::npos) {
      const size_t size = std::stoul(reply.headers.substr(length + 16));
      if (bytes.size() < at + size) break;
      reply.body = bytes.substr(at, size);
      at += size;
    } else if (reply.headers.find("Transfer-Encoding: chunked") != std::string::npos) {
      size_t size = 1;
      while (size > 0) {
        const size_t line_end = bytes.find("\r\n", at);
        if (line_end == std::string::npos) return replies;
        size = std::stoul(bytes.substr(at, line_end - at), nullptr, 16);
        if (bytes.size() < line_end + 2 + size + 2) return replies;
        reply.body += bytes.substr(line_end + 2, size);
        at = line_end + 2 + size + 2;
      }
    } else {
      break;
    }
    replies.push_back(std::move(reply));
  }
  return replies;
}

// Pipelined requests of every kind (generation, streamed generation, bad ones) are answered in
// order, whether they arrive in one write or in pieces that split requests anywhere. The server
// may end a connection after some requests (httplib's keep-alive limit), but only with a
// "Connection: close" on the last answer, never by dropping requests silently (RFC 7230 6.3.2).
TEST(ServeConnections, PipelinedRequestsOfEveryKindAreAnsweredInOrder) {
  ServerProcess server(server_test_model(), "-t 1 -np 1");
  ASSERT_GT(server.port(), 0);
  const std::vector<std::pair<std::string, int>> requests = {
      {post("HTTP/1.1", "/v1/completions", R"({"prompt": "hi", "max_tokens": 2, "ignore_eos": true})"), 200},
      {post("HTTP/1.1", "/v1/completions",
            R"({"prompt": "hi", "max_tokens": 2, "ignore_eos": true, "stream": true})"),
       200},
      {post("HTTP/1.1", "/tokenize", R"({"content": )"), 400},
      {"GET /v1/nothing HTTP/1.1\r\nHost: x\r\n\r\n", 404},
      {post("HTTP/1.1", "/tokenize", R"({"content": "hi"})"), 200},
      {"GET /health HTTP/1.1\r\nHost: x\r\n\r\n", 200},
      {"GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", 200},
  };
  std::string pipeline;
  for (const auto& request : requests) pipeline += request.first;
  for (const size_t piece : {pipeline.size(), size_t{7}}) {
    const int fd = connect_from("127.0.0.1", server.port());
    ASSERT_GE(fd, 0);
    // A send fails once the server has ended the connection (allowed after a "Connection: close"
    // answer, which the checks below require): the rest of the pipeline is then not sent.
    for (size_t at = 0; at < pipeline.size(); at += piece) {
      if (!send_all(fd, pipeline.substr(at, piece))) break;
      if (piece < pipeline.size()) std::this_thread::sleep_for(std::chrono::microseconds(500));
    }
    const auto asked = Clock::now();
    const std::string received = receive(fd, 10);
    EXPECT_LT(seconds_since(asked), 5.0) << "the connection was left open";
    close(fd);
    const std::vector<Reply> replies = split_replies(received);
    ASSERT_GE(replies.size(), 2u) << received;
    ASSERT_LE(replies.size(), requests.size()) << received;
    EXPECT_NE(replies.back().headers.find("Connection: close"), std::string::npos) << received;
    for (size_t i = 0; i < replies.size(); ++i) {
      EXPECT_EQ(replies[i].status, requests[i].second) << "request " << i << ": " << received;
      const bool last = i + 1 == replies.size();
      EXPECT_EQ(replies[i].headers.find("Connection: close") != std::string::npos, last) << "request " << i;
    }
    EXPECT_EQ(json::parse(replies[0].body)["usage"]["completion_tokens"], 2);
    EXPECT_EQ(replies[1].body.substr(replies[1].body.size() - 14), "data: [DONE]\n\n") << replies[1].body;
    if (replies.size() > 2) {
      EXPECT_TRUE(json::parse(replies[2].body).contains("error")) << replies[2].body;
    }
  }
  EXPECT_EQ(server.terminate(), 0);
}

// HTTP/1.0 answers of every kind, errors too, have a Content-Length and end with the connection.
TEST(ServeConnections, Http10ErrorsAndPlainAnswersAreReadableAndClosed) {
  ServerProcess server(server_test_model(), "-t 1");
  ASSERT_GT(server.port(), 0);
  const std::vector<std::pair<std::string, int>> requests = {
      {"GET /health HTTP/1.0\r\n\r\n", 200},
      {"GET /v1/nothing HTTP/1.0\r\n\r\n", 404},
      {post("HTTP/1.0", "/v1/completions", R"({"prompt": )"), 400},
      {post("HTTP/1.0", "/v1/completions", R"({"prompt": "hi", "max_tokens": "x"})"), 400},
      // Keep-alive is refused for HTTP/1.0: the answer ends with the connection.
      {post("HTTP/1.0", "/tokenize", R"({"content": "hi"})", "Connection: keep-alive\r\n"), 200},
  };
  for (const auto& [request, status] : requests) {
    const int fd = connect_from("127.0.0.1", server.port());
    ASSERT_GE(fd, 0);
    ASSERT_TRUE(send_all(fd, request));
    const auto asked = Clock::now();
    const std::string received = receive(fd, 10);
    EXPECT_LT(seconds_since(asked), 5.0) << "the connection was left open: " << request;
    close(fd);
    const std::vector<Reply> replies = split_replies(received);
    ASSERT_EQ(replies.size(), 1u) << received;
    EXPECT_EQ(replies[0].status, status) << received;
    EXPECT_EQ(replies[0].headers.find("chunked"), std::string::npos) << received;
    EXPECT_NE(replies[0].headers.find("Content-Length: "), std::string::npos) << received;
    const json body = json::parse(replies[0].body, nullptr, false);
    EXPECT_FALSE(body.is_discarded()) << received;
    EXPECT_EQ(body.contains("error"), status != 200) << received;
  }
  EXPECT_EQ(server.terminate(), 0);
}

// A plain request that ends in an error event (here the shutdown after --timeout) used to make
// the server abort with SIGABRT and the client get an empty 200.
TEST(ServeConnections, APlainRequestEndedByShutdownGetsAnErrorAndTheServerExitsZero) {
  ServerProcess server(server_test_model(), "-t 1 -np 1 --timeout 1");
  ASSERT_GT(server.port(), 0);
  int status = 0;
  std::string body;
  std::thread waiting([&] {
    httplib::Client client("127.0.0.1", server.port());
    client.set_read_timeout(20, 0);
    const auto result =
        client.Post("/v1/completions", R"({"prompt": "hi", "max_tokens": 100000000, "ignore_eos": true})",
                    "application/json");
    status = result ? result->status : -1;
    body = result ? result->body : "";
  });
  httplib::Client client("127.0.0.1", server.port());
  bool running = false;
  for (int attempt = 0; attempt < 500 && !running; ++attempt) {
    running = client.Get("/metrics")->body.find("mambacpp_active_requests 1\n") != std::string::npos;
    if (!running) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_TRUE(running) << client.Get("/metrics")->body;
  EXPECT_EQ(server.terminate(10), 0) << server.stderr_text();
  waiting.join();
  EXPECT_EQ(status, 500) << body;
  const json error = json::parse(body, nullptr, false);
  ASSERT_TRUE(error.contains("error")) << body;
  EXPECT_TRUE(error["error"]["message"].is_string());
}

}  // namespace
}  // namespace mb

// SPDX-License-Identifier: MIT
// Where `mambacpp serve` listens and what it says of each request (issue 41): an IPv6 listen
// address is printed, and accepted, in brackets ("http://[::1]:8080"), and every generation
// request gets one line on stderr, as llama-server logs its requests.
#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <nlohmann/json.hpp>
#include <regex>
#include <string>

#include "server_process.h"
#include "socket_util.h"

namespace mb::listen_test {
namespace {

using nlohmann::json;

bool ipv6_loopback_available() {
  const int fd = socket(AF_INET6, SOCK_STREAM, 0);
  if (fd < 0) return false;
  sockaddr_in6 address{};
  address.sin6_family = AF_INET6;
  address.sin6_addr = in6addr_loopback;
  const bool bound = bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0;
  close(fd);
  return bound;
}

// `http://::1:8080` is no URL: the address used to be printed bare, and `--host [::1]`, the
// spelling a URL has, could not be bound.
TEST(ServeListen, AnIpv6AddressIsPrintedAndAcceptedInBrackets) {
  if (!ipv6_loopback_available()) GTEST_SKIP() << "no IPv6 loopback on this machine";
  for (const std::string host : {"::1", "[::1]"}) {
    // ServerProcess waits for "listening on http://[::1]:PORT" and /health over IPv6.
    test::ServerProcess server(test::server_test_model(), "-t 1", host);
    ASSERT_GT(server.port(), 0) << host;
    EXPECT_NE(server.stdout_text().find("listening on http://[::1]:" + std::to_string(server.port()) + "\n"),
              std::string::npos)
        << server.stdout_text();
    const int fd = test::connect_ipv6_loopback(server.port());
    ASSERT_GE(fd, 0);
    ASSERT_TRUE(test::send_all(fd, "GET /health HTTP/1.1\r\nHost: [::1]\r\nConnection: close\r\n\r\n"));
    const std::string reply = test::receive(fd, 5);
    close(fd);
    EXPECT_EQ(reply.rfind("HTTP/1.1 200", 0), 0u) << reply;
    EXPECT_EQ(server.terminate(), 0) << server.stderr_text();
  }
}

// The line of request `id`, or "".
std::string log_line(const std::string& log, const std::string& id) {
  const size_t at = log.find("request " + id + " ");
  if (at == std::string::npos) return "";
  const size_t begin = log.rfind('\n', at) == std::string::npos ? 0 : log.rfind('\n', at) + 1;
  return log.substr(begin, log.find('\n', at) - begin);
}

std::string expected_line(const std::string& id, const std::string& path, int status, const json& usage) {
  const int64_t cached = usage.contains("prompt_tokens_details")
                             ? usage["prompt_tokens_details"]["cached_tokens"].get<int64_t>()
                             : 0;
  return "mambacpp serve: request " + id + " from 127.0.0.1: POST " + path + " " + std::to_string(status) +
         ", " + std::to_string(usage["prompt_tokens"].get<int64_t>()) + " prompt tokens (" +
         std::to_string(cached) + " cached), " + std::to_string(usage["completion_tokens"].get<int64_t>()) +
         " generated, ";
}

// One line per generation request: its response id, client, status, prompt tokens (and how many
// a cached state supplied), tokens generated and time; a streamed one and a refused one too.
TEST(ServeListen, EachGenerationRequestIsLoggedOnOneLine) {
  test::ServerProcess server(test::server_test_model(), "-t 1");
  ASSERT_GT(server.port(), 0);
  httplib::Client client("127.0.0.1", server.port());
  client.set_read_timeout(30, 0);
  const std::string body = R"({"prompt": "Hello world, once more", "max_tokens": 3, "ignore_eos": true})";
  const auto first = client.Post("/v1/completions", body, "application/json");
  ASSERT_TRUE(first);
  ASSERT_EQ(first->status, 200) << first->body;
  // The same prompt again resumes from the state the first one cached.
  const auto second = client.Post("/v1/completions", body, "application/json");
  ASSERT_TRUE(second);
  const json answers[] = {json::parse(first->body), json::parse(second->body)};
  EXPECT_GT(answers[1]["usage"]["prompt_tokens_details"]["cached_tokens"].get<int>(), 0) << second->body;
  const auto stream = client.Post(
      "/v1/chat/completions",
      R"({"messages": [{"role": "user", "content": "hi"}], "max_tokens": 2, "ignore_eos": true, "stream": true,
          "stream_options": {"include_usage": true}})",
      "application/json");
  ASSERT_TRUE(stream);
  ASSERT_EQ(stream->status, 200);
  json stream_usage;
  std::string stream_id;
  for (size_t at = stream->body.find("data: {"); at != std::string::npos;
       at = stream->body.find("data: {", at + 1)) {
    const json chunk = json::parse(stream->body.substr(at + 6, stream->body.find('\n', at) - at - 6));
    stream_id = chunk["id"];
    if (chunk.contains("usage") && chunk["usage"].is_object()) stream_usage = chunk["usage"];
  }
  ASSERT_TRUE(stream_usage.is_object()) << stream->body;
  const auto refused =
      client.Post("/v1/completions", R"({"prompt": "hi", "max_tokens": "x"})", "application/json");
  ASSERT_TRUE(refused);
  EXPECT_EQ(refused->status, 400);
  ASSERT_TRUE(client.Get("/health"));
  EXPECT_EQ(server.terminate(), 0);

  const std::string log = server.stderr_text();
  const std::regex time_at_end(R"(, [0-9]+\.[0-9]{3} s$)");
  for (const json& answer : answers) {
    const std::string line = log_line(log, answer["id"]);
    EXPECT_EQ(line.rfind(expected_line(answer["id"], "/v1/completions", 200, answer["usage"]), 0), 0u)
        << line << "\n"
        << log;
    EXPECT_TRUE(std::regex_search(line, time_at_end)) << line;
  }
  const std::string line = log_line(log, stream_id);
  EXPECT_EQ(line.rfind(expected_line(stream_id, "/v1/chat/completions", 200, stream_usage), 0), 0u) << line;
  EXPECT_TRUE(std::regex_search(line, time_at_end)) << line;
  // The refused one is logged with its status; /health is not logged.
  const std::regex refused_line(
      R"(request cmpl-[0-9a-f]{16} from 127\.0\.0\.1: POST /v1/completions 400, 0 prompt tokens \(0 cached\), 0 generated)");
  EXPECT_TRUE(std::regex_search(log, refused_line)) << log;
  EXPECT_EQ(log.find("/health"), std::string::npos) << log;
  size_t lines = 0;
  for (size_t at = log.find("mambacpp serve: request "); at != std::string::npos;
       at = log.find("mambacpp serve: request ", at + 1))
    ++lines;
  EXPECT_EQ(lines, 4u) << log;
}

}  // namespace
}  // namespace mb::listen_test

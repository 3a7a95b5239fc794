// SPDX-License-Identifier: MIT
// `mambacpp serve` behind a proxy (issue 41): every request of a proxy comes from its address, so
// the per-address cap used to refuse the proxy itself (HAProxy answered 502s and marked a healthy
// replica down). From a --trusted-proxy the connections are not capped; the cap counts the
// requests in flight of the client the proxy forwards for (the rightmost untrusted
// X-Forwarded-For hop), and anyone else's X-Forwarded-For is ignored.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/error.h"
#include "server/connections.h"
#include "server_process.h"
#include "socket_util.h"

namespace mb::proxy_test {
namespace {

using server::AddressRange;
using server::canonical_address;
using server::forwarded_client;
using server::parse_address_range;

TEST(TrustedProxy, AddressesAndRanges) {
  EXPECT_TRUE(parse_address_range("10.0.0.0/8").contains("10.200.3.4"));
  EXPECT_FALSE(parse_address_range("10.0.0.0/8").contains("11.0.0.1"));
  EXPECT_TRUE(parse_address_range("127.0.0.1").contains("127.0.0.1"));
  EXPECT_FALSE(parse_address_range("127.0.0.1").contains("127.0.0.2"));
  EXPECT_TRUE(parse_address_range("127.0.0.64/26").contains("127.0.0.127"));
  EXPECT_FALSE(parse_address_range("127.0.0.64/26").contains("127.0.0.128"));
  EXPECT_TRUE(parse_address_range("0.0.0.0/0").contains("203.0.113.9"));
  EXPECT_FALSE(parse_address_range("0.0.0.0/0").contains("::1"));
  EXPECT_TRUE(parse_address_range("fd00::/8").contains("fd12:3456::1"));
  EXPECT_FALSE(parse_address_range("fd00::/8").contains("fe80::1"));
  EXPECT_TRUE(parse_address_range("::1").contains("::1"));
  // A peer of a dual-stack socket is spelled as an IPv4-mapped IPv6 address.
  EXPECT_TRUE(parse_address_range("10.0.0.0/8").contains("::ffff:10.1.2.3"));
  EXPECT_TRUE(parse_address_range("::ffff:10.0.0.0/104").contains("10.9.9.9"));
  EXPECT_FALSE(parse_address_range("10.0.0.0/8").contains("not an address"));
  for (const char* bad : {"", "10.0.0.0/", "10.0.0.0/33", "::1/129", "10.0.0/8", "host.example",
                          "10.0.0.1/-1", "10.0.0.1/8/8"}) {
    try {
      parse_address_range(bad);
      ADD_FAILURE() << "accepted '" << bad << "'";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(std::string("'") + bad), std::string::npos) << e.what();
    }
  }
  EXPECT_EQ(canonical_address("::FFFF:127.0.0.1"), "127.0.0.1");
  EXPECT_EQ(canonical_address(" 2001:DB8:0:0::1 "), "2001:db8::1");
  EXPECT_EQ(canonical_address("unknown"), "");
}

TEST(TrustedProxy, TheClientIsTheRightmostUntrustedHop) {
  const std::vector<AddressRange> trusted = {parse_address_range("127.0.0.1"),
                                             parse_address_range("10.0.0.0/8")};
  // Not from a trusted proxy: the header is the client's own claim and is ignored.
  EXPECT_EQ(forwarded_client("203.0.113.7", "198.51.100.1", trusted), "203.0.113.7");
  // From a trusted proxy: the hop it appended.
  EXPECT_EQ(forwarded_client("127.0.0.1", "198.51.100.1", trusted), "198.51.100.1");
  // What the client wrote itself, left of the proxy's hop, is not believed.
  EXPECT_EQ(forwarded_client("127.0.0.1", "1.2.3.4, 198.51.100.1", trusted), "198.51.100.1");
  // Through two trusted proxies: past the inner one's hop.
  EXPECT_EQ(forwarded_client("127.0.0.1", "1.2.3.4, 198.51.100.1, 10.1.1.1", trusted), "198.51.100.1");
  // A hop that is not an address ends the walk at the trusted hop to its right.
  EXPECT_EQ(forwarded_client("127.0.0.1", "198.51.100.1, unknown, 10.1.1.1", trusted), "10.1.1.1");
  EXPECT_EQ(forwarded_client("127.0.0.1", "198.51.100.1,", trusted), "127.0.0.1");
  // No header (a health check), or only trusted hops: the leftmost trusted address.
  EXPECT_EQ(forwarded_client("127.0.0.1", "", trusted), "127.0.0.1");
  EXPECT_EQ(forwarded_client("127.0.0.1", "10.2.2.2", trusted), "10.2.2.2");
  EXPECT_EQ(forwarded_client("::ffff:127.0.0.1", "2001:DB8::5", trusted), "2001:db8::5");
  EXPECT_EQ(forwarded_client("127.0.0.1", "198.51.100.1", {}), "127.0.0.1");
}

std::string proxied_request(const std::string& forwarded_for, const std::string& body) {
  return "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n" +
         (forwarded_for.empty() ? std::string() : "X-Forwarded-For: " + forwarded_for + "\r\n") +
         "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
}

const std::string kEndlessStream =
    R"({"prompt": "hi", "max_tokens": 100000000, "ignore_eos": true, "stream": true})";
const std::string kShort = R"({"prompt": "hi", "max_tokens": 1})";

// The status of the answer `fd` receives for `request`, or 0. Its body is read too when it has a
// Content-Length (a stream's is left), so that the next answer on the connection starts clean.
int status_of(int fd, const std::string& request) {
  if (!test::send_all(fd, request)) return 0;
  std::string reply = test::receive(fd, 10, "\r\n\r\n");
  const size_t head = reply.find("\r\n\r\n");
  const size_t length = reply.find("Content-Length: ");
  if (head != std::string::npos && length != std::string::npos && length < head) {
    const size_t total = head + 4 + std::stoul(reply.substr(length + 16));
    if (reply.size() < total) reply += test::receive_bytes(fd, total - reply.size(), 10);
  }
  return reply.rfind("HTTP/1.1 ", 0) == 0 ? std::atoi(reply.c_str() + 9) : 0;
}

TEST(ServeProxy, ForwardedClientsAreCappedNotTheProxy) {
  test::ServerProcess server(test::server_test_model(),
                             "-t 1 -np 4 --max-queue 8 --max-conns-per-ip 2 --trusted-proxy 127.0.0.1 "
                             "--trusted-proxy 127.0.0.64/26");
  ASSERT_GT(server.port(), 0);
  // The proxy holds more connections than the cap, and they all serve.
  std::vector<int> proxy;
  for (int i = 0; i < 6; ++i) {
    proxy.push_back(test::connect_from("127.0.0.1", server.port()));
    ASSERT_GE(proxy.back(), 0);
  }
  for (int fd : proxy) EXPECT_EQ(status_of(fd, "GET /health HTTP/1.1\r\nHost: x\r\n\r\n"), 200);
  // Two endless streams of one forwarded client: the cap.
  EXPECT_EQ(status_of(proxy[0], proxied_request("198.51.100.5", kEndlessStream)), 200);
  EXPECT_EQ(status_of(proxy[1], proxied_request("203.0.113.1, 198.51.100.5", kEndlessStream)), 200);
  // A third of that client's, also through a second trusted proxy: 429, with Retry-After.
  const int third = test::connect_from("127.0.0.1", server.port());
  ASSERT_TRUE(test::send_all(third, proxied_request("1.1.1.1, 198.51.100.5, 127.0.0.70", kShort)));
  const std::string refused = test::receive(third, 10);
  close(third);
  EXPECT_EQ(refused.rfind("HTTP/1.1 429", 0), 0u) << refused;
  EXPECT_NE(refused.find("Retry-After: 1"), std::string::npos) << refused;
  EXPECT_NE(refused.find("--max-conns-per-ip 2"), std::string::npos) << refused;
  // Another client of the same proxy is served, and so are the proxy's own requests.
  EXPECT_EQ(status_of(proxy[2], proxied_request("198.51.100.6", kShort)), 200);
  EXPECT_EQ(status_of(proxy[3], proxied_request("", kShort)), 200);
  // Not from a trusted proxy the header is ignored: 127.0.0.3 is capped by its connections and
  // its requests do not count against 198.51.100.5.
  std::vector<int> untrusted;
  for (int i = 0; i < 3; ++i) untrusted.push_back(test::connect_from("127.0.0.3", server.port()));
  EXPECT_EQ(status_of(untrusted[0], proxied_request("198.51.100.5", kShort)), 200);
  EXPECT_EQ(status_of(untrusted[2], proxied_request("198.51.100.5", kShort)), 0);  // closed: the third
  // Once a stream ends (its client gone), the forwarded client may send again.
  close(proxy[0]);
  int status = 0;
  for (int attempt = 0; attempt < 100 && status != 200; ++attempt) {
    const int fd = test::connect_from("127.0.0.1", server.port());
    status = status_of(fd, proxied_request("198.51.100.5", kShort));
    close(fd);
    if (status != 200) usleep(50000);
  }
  EXPECT_EQ(status, 200);
  for (size_t i = 1; i < proxy.size(); ++i) close(proxy[i]);
  for (int fd : untrusted) close(fd);
  EXPECT_EQ(server.terminate(), 0) << server.stderr_text();
}

TEST(ServeProxy, ABadTrustedProxyIsRefusedWithItsName) {
  const test::ServeExit result =
      test::serve_until_exit(test::server_test_model(), "-t 1 --trusted-proxy 10.0.0.0/40", 10);
  EXPECT_EQ(result.status, 1);
  EXPECT_NE(result.stderr_text.find("--trusted-proxy: '10.0.0.0/40'"), std::string::npos)
      << result.stderr_text;
}

}  // namespace
}  // namespace mb::proxy_test

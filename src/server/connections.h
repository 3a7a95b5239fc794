// SPDX-License-Identifier: MIT
// The connection layer under cpp-httplib's request parser: who may connect, how long a request may
// take to arrive, and which thread serves it.
//
// cpp-httplib 0.11 gives every accepted connection a pool thread for its whole life, so a few
// dozen clients that send one byte and then nothing hold every thread until the read timeout
// (slowloris); it reads a request with a fresh buffer each time, so pipelined requests after the
// first are lost; and it reads a whole oversized body before answering 413. ConnectionServer
// replaces its per-connection loop (the virtual process_and_close_socket) with:
//
//  * one poller thread that holds every connection while its request arrives: bytes are read
//    into the connection's own buffer until the headers and the Content-Length body are all
//    there: the headers within `read_timeout` of their first byte, the body within `read_timeout`
//    of its last progress and at 16 KiB/s on average (408 and close past either), or the first
//    byte within the keep-alive timeout for an idle connection (closed); no thread waits on a
//    slow client;
//  * requests answered from their headers alone, without reading a body: a Content-Length over
//    the body limit (413, also instead of "100 Continue"), an unknown expectation (417), headers
//    over 64 KiB (431), a malformed Content-Length (400), a body without a Content-Length
//    (Transfer-Encoding: chunked; 411);
//  * worker threads that run httplib's own parser and routing on a complete request, through a
//    stream that reads the request from the connection's buffer and nothing past it, so the bytes
//    of the next (pipelined) request stay there for the next round, and a worker never waits for
//    a client's bytes;
//  * a cap on the connections of one client address (refused by closing); behind a trusted proxy
//    (`trusted_proxies`) the cap counts the requests in flight of the client the proxy forwards
//    for (X-Forwarded-For), and a request over it is answered 429;
//  * a cap on all connections, past which the connection that has waited longest for its request
//    is closed, so a crowd of slow clients cannot keep a new one out; and an overall deadline for
//    a request's head, so a client that sends a byte now and then cannot hold its connection.
//
// Descriptors may have any number: every wait is poll(), and httplib, whose parser refuses a
// descriptor select() cannot watch, is never handed one (it only ever reads and writes through
// ConnectionStream).
//
// HTTP/1.0 requests are answered with "Connection: close" and the connection is closed after
// the response, so a response whose length is not known in advance can be close-delimited.
#pragma once

#include <httplib.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

namespace mb::server {

// An address or a CIDR range of addresses ("10.0.0.7", "10.0.0.0/8", "::1", "fd00::/8").
// IPv4-mapped IPv6 addresses ("::ffff:10.0.0.7") are the IPv4 address they carry.
struct AddressRange {
  int family = 0;  // AF_INET or AF_INET6
  unsigned char bytes[16] = {};
  int prefix_bits = 0;  // how many leading bits an address must share with `bytes`
  bool contains(std::string_view address) const;
};
// Throws mb::Error naming `text` when it is neither an address nor a range.
AddressRange parse_address_range(std::string_view text);
// The canonical spelling of an address (inet_ntop's; an IPv4-mapped one as IPv4), or "" when
// `text` is not one.
std::string canonical_address(std::string_view text);

// The client a request stands for. From a peer that is not a trusted proxy: the peer. From a
// trusted one: the rightmost hop of `forwarded_for` (the X-Forwarded-For values in order, comma
// separated) that is not a trusted proxy; every hop a proxy appends is its own peer, so hops
// further left, which the client wrote, are not believed. A hop that is not an address ends the
// walk at the trusted hop to its right; no header, or only trusted hops, give the leftmost one.
std::string forwarded_client(const std::string& peer, std::string_view forwarded_for,
                             const std::vector<AddressRange>& trusted_proxies);

struct ConnectionLimits {
  int read_timeout_seconds = 10;    // --read-timeout: a request's head must arrive within it
  int write_timeout_seconds = 600;  // --timeout: a response's bytes must keep leaving
  size_t max_body_bytes = 8u << 20;
  int max_connections_per_ip = 64;            // 0 = no cap
  size_t max_connections = 4096;              // --max-connections: connections held at once
  size_t workers = 64;                        // requests served at once
  std::vector<AddressRange> trusted_proxies;  // --trusted-proxy
};

// Raises this process's soft limit of open descriptors to its hard limit (each connection holds
// one) and returns the soft limit now in force.
size_t raise_open_file_limit();

// What the headers at the start of `bytes` say about the request (pure, for the poller and tests).
struct RequestScan {
  enum class State {
    Incomplete,         // more bytes are needed
    Complete,           // the headers and the whole Content-Length body are there
    ContinueThenBody,   // "Expect: 100-continue" with an acceptable length: 100, then wait for the body
    TooLarge,           // 413: Content-Length over the limit
    HeadersTooLarge,    // 431
    BadLength,          // 400: a Content-Length that is not one decimal number
    LengthRequired,     // 411: a Transfer-Encoding (a chunked body could not be waited for)
    ExpectationFailed,  // 417: an expectation other than 100-continue
  } state = State::Incomplete;
  size_t header_bytes = 0;                            // through the blank line
  size_t body_bytes = 0;                              // the Content-Length (0 when absent or chunked)
  size_t expect_line_begin = 0, expect_line_end = 0;  // the Expect header line, for ContinueThenBody
};
RequestScan scan_request(std::string_view bytes, size_t max_body_bytes);

class ConnectionServer : public httplib::Server {
 public:
  // `error_body(status)` is the JSON body of an answer the layer gives itself (413, 408, ...).
  ConnectionServer(ConnectionLimits limits, std::function<std::string(int status)> error_body);
  ~ConnectionServer() override;

  // cpp-httplib listens with a backlog of 5; listen() again on the bound socket raises it.
  void widen_backlog(int backlog);
  // After stop(): closes the connections that wait and joins the poller and the workers (a
  // request in flight ends first; httplib aborts its content provider once stop() ran).
  void shutdown_connections();

  // For a handler, on its worker thread: whether the client of the request is still connected
  // (it has not closed or reset the connection).
  static bool client_connected();

 private:
  struct Connection;
  using Clock = std::chrono::steady_clock;

  bool process_and_close_socket(socket_t sock) override;
  void poll_loop();
  // Closes the connections that have waited longest while more than max_connections are held.
  void shed_excess();
  void worker_loop();
  void serve(std::unique_ptr<Connection> connection);
  // Reads what has arrived; returns false when the connection is finished (closed or answered).
  bool receive(Connection& connection);
  // Decides from the buffered bytes: hand over to a worker, answer at once, or keep waiting.
  bool dispatch(std::unique_ptr<Connection>& connection);
  // Sends the layer's own answer, half-closes, and hands the connection to the poller to linger.
  void answer_and_linger(std::unique_ptr<Connection> connection, int status);
  void wait_for_request(std::unique_ptr<Connection> connection, bool idle);
  // For a request that came through a trusted proxy: counts it against its forwarded client,
  // or returns false when that client has max_connections_per_ip requests in flight.
  bool admit_forwarded(Connection& connection, std::string_view head);
  void end_forwarded(Connection& connection);
  void release(Connection& connection);
  void wake();

  ConnectionLimits limits_;
  std::function<std::string(int)> error_body_;
  std::atomic<bool> stopping_{false};
  int wake_fd_ = -1;

  std::mutex mutex_;  // guards everything below
  // Per client address: its connections, and the requests in flight a trusted proxy forwarded.
  std::map<std::string, int> per_ip_;
  size_t connections_ = 0;                             // every connection held: waiting, served or lingering
  std::vector<std::unique_ptr<Connection>> incoming_;  // for the poller
  std::deque<std::unique_ptr<Connection>> ready_;      // for the workers
  std::condition_variable work_;

  std::vector<std::unique_ptr<Connection>> waiting_;  // the poller's own
  std::thread poller_;
  std::vector<std::thread> workers_;
  bool shut_down_ = false;
};

}  // namespace mb::server

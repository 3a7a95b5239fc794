// SPDX-License-Identifier: MIT
#include "server/connections.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <tuple>

#include "core/error.h"

namespace mb::server {

namespace {

constexpr size_t kMaxHeaderBytes = 64u << 10;
// How long a connection answered by the layer itself is read (and the bytes dropped) before it is
// closed: closing with unread bytes would reset it and could destroy the answer in transit.
constexpr auto kLinger = std::chrono::seconds(1);
// A body, unlike a head, may take long on a slow link: it keeps --read-timeout between reads, but
// must arrive at this rate on average, so that no trickle holds a connection for ever.
constexpr size_t kMinBodyBytesPerSecond = 16u << 10;
// Connections accepted past max_connections before the poller has closed the longest-waiting
// ones (it does so at its next round); past this many more a new one is closed at once.
constexpr size_t kAcceptOverflow = 64;

bool same_name(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) == std::tolower(static_cast<unsigned char>(y));
         });
}

std::string_view trim(std::string_view text) {
  while (!text.empty() && (text.front() == ' ' || text.front() == '\t')) text.remove_prefix(1);
  while (!text.empty() && (text.back() == ' ' || text.back() == '\t' || text.back() == '\r'))
    text.remove_suffix(1);
  return text;
}

// An IPv4 or IPv6 address, read by inet_pton; an IPv4-mapped IPv6 address is the IPv4 one.
struct IpAddress {
  int family = 0;
  unsigned char bytes[16] = {};
  bool mapped = false;  // written as ::ffff:a.b.c.d
};

bool parse_ip(std::string_view text, IpAddress& address) {
  text = trim(text);
  text = text.substr(0, text.find('%'));  // an IPv6 zone ("fe80::1%eth0") names no other host
  if (text.empty() || text.size() >= INET6_ADDRSTRLEN) return false;
  const std::string terminated(text);
  if (inet_pton(AF_INET, terminated.c_str(), address.bytes) == 1) {
    address.family = AF_INET;
    return true;
  }
  if (inet_pton(AF_INET6, terminated.c_str(), address.bytes) != 1) return false;
  static const unsigned char kMapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
  address.family = AF_INET6;
  if (std::memcmp(address.bytes, kMapped, sizeof kMapped) == 0) {
    std::memmove(address.bytes, address.bytes + 12, 4);
    address.family = AF_INET;
    address.mapped = true;
  }
  return true;
}

// The values of every `name` line of a request head, in order, joined by commas (RFC 9110 5.3).
std::string joined_header(std::string_view head, std::string_view name) {
  std::string joined;
  for (size_t line_begin = head.find("\r\n"); line_begin != std::string_view::npos;) {
    line_begin += 2;
    const size_t line_end = head.find("\r\n", line_begin);
    if (line_end == std::string_view::npos || line_end == line_begin) break;
    const std::string_view line = head.substr(line_begin, line_end - line_begin);
    const size_t colon = line.find(':');
    if (colon != std::string_view::npos && same_name(line.substr(0, colon), name))
      (joined += joined.empty() ? "" : ",") += trim(line.substr(colon + 1));
    line_begin = line_end;
  }
  return joined;
}

const char* reason_phrase(int status) {
  switch (status) {
    case 400:
      return "Bad Request";
    case 408:
      return "Request Timeout";
    case 411:
      return "Length Required";
    case 413:
      return "Payload Too Large";
    case 417:
      return "Expectation Failed";
    case 429:
      return "Too Many Requests";
    case 431:
      return "Request Header Fields Too Large";
    default:
      return "Error";
  }
}

// Whether the peer is still there: not closed, reset or hung up (bytes it sent early count as
// alive).
bool peer_alive(int fd) {
  pollfd p{fd, POLLIN | POLLRDHUP, 0};
  if (::poll(&p, 1, 0) < 0) return false;
  if (p.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL)) return false;
  if (!(p.revents & POLLIN)) return true;
  char byte;
  const ssize_t n = ::recv(fd, &byte, 1, MSG_PEEK | MSG_DONTWAIT);
  return n > 0 || (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR));
}

void address_of(int fd, bool remote, std::string& ip, int& port) {
  sockaddr_storage address{};
  socklen_t length = sizeof address;
  const int got = remote ? getpeername(fd, reinterpret_cast<sockaddr*>(&address), &length)
                         : getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length);
  char host[NI_MAXHOST] = "", service[NI_MAXSERV] = "";
  if (got != 0 || getnameinfo(reinterpret_cast<sockaddr*>(&address), length, host, sizeof host, service,
                              sizeof service, NI_NUMERICHOST | NI_NUMERICSERV) != 0) {
    ip.clear();
    port = 0;
    return;
  }
  ip = host;
  port = std::atoi(service);
}

thread_local int current_client_fd = -1;

// The connection handed to accept's task queue is only registered with the poller, which takes
// no time, so it runs on the accepting thread instead of a pool.
class InlineQueue final : public httplib::TaskQueue {
 public:
  void enqueue(std::function<void()> fn) override { fn(); }
  void shutdown() override {}
};

// The status of a request refused from its headers alone.
int refusal_status(RequestScan::State state) {
  switch (state) {
    case RequestScan::State::TooLarge:
      return 413;
    case RequestScan::State::HeadersTooLarge:
      return 431;
    case RequestScan::State::LengthRequired:
      return 411;
    case RequestScan::State::ExpectationFailed:
      return 417;
    default:
      return 400;  // BadLength
  }
}

}  // namespace

std::string canonical_address(std::string_view text) {
  IpAddress address;
  if (!parse_ip(text, address)) return "";
  char spelled[INET6_ADDRSTRLEN] = "";
  inet_ntop(address.family, address.bytes, spelled, sizeof spelled);
  return spelled;
}

AddressRange parse_address_range(std::string_view text) {
  const size_t slash = text.find('/');
  IpAddress address;
  if (!parse_ip(text.substr(0, slash), address))
    throw Error("'" + std::string(text) +
                "' is not an IP address or a CIDR range (such as 10.0.0.0/8 or ::1)");
  AddressRange range;
  range.family = address.family;
  std::memcpy(range.bytes, address.bytes, sizeof range.bytes);
  const int bits = address.family == AF_INET ? 32 : 128;
  range.prefix_bits = bits;
  if (slash != std::string_view::npos) {
    const std::string_view digits = text.substr(slash + 1);
    int prefix = 0;
    bool valid = !digits.empty() && digits.size() <= 3;
    for (char c : digits) valid = valid && c >= '0' && c <= '9';
    for (char c : digits) prefix = prefix * 10 + (c - '0');
    if (address.mapped) prefix -= 96;  // ::ffff:10.0.0.0/104 is 10.0.0.0/8
    if (!valid || prefix < 0 || prefix > bits)
      throw Error("'" + std::string(text) + "': the prefix length after '/' must be 0 to " +
                  std::to_string(bits));
    range.prefix_bits = prefix;
  }
  return range;
}

bool AddressRange::contains(std::string_view text) const {
  IpAddress address;
  if (!parse_ip(text, address) || address.family != family) return false;
  const int whole = prefix_bits / 8, rest = prefix_bits % 8;
  if (std::memcmp(address.bytes, bytes, static_cast<size_t>(whole)) != 0) return false;
  const unsigned mask = (0xffu << (8 - rest)) & 0xffu;
  return rest == 0 || ((address.bytes[whole] ^ bytes[whole]) & mask) == 0;
}

std::string forwarded_client(const std::string& peer, std::string_view forwarded_for,
                             const std::vector<AddressRange>& trusted_proxies) {
  const auto trusted = [&](const std::string& address) {
    return std::any_of(trusted_proxies.begin(), trusted_proxies.end(),
                       [&](const AddressRange& range) { return range.contains(address); });
  };
  std::string client = canonical_address(peer);
  if (client.empty()) client = peer;
  while (trusted(client) && !forwarded_for.empty()) {
    const size_t comma = forwarded_for.rfind(',');
    const std::string hop =
        canonical_address(comma == std::string_view::npos ? forwarded_for : forwarded_for.substr(comma + 1));
    if (hop.empty()) break;
    client = hop;
    forwarded_for = comma == std::string_view::npos ? std::string_view() : forwarded_for.substr(0, comma);
  }
  return client;
}

size_t raise_open_file_limit() {
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0) return 1024;
  // An unlimited hard limit is still bounded by the kernel's nr_open; a million is its default.
  const rlim_t wanted = limit.rlim_max == RLIM_INFINITY ? rlim_t{1} << 20 : limit.rlim_max;
  if (limit.rlim_cur == RLIM_INFINITY || limit.rlim_cur >= wanted) return static_cast<size_t>(limit.rlim_cur);
  rlimit raised = limit;
  raised.rlim_cur = wanted;
  if (setrlimit(RLIMIT_NOFILE, &raised) == 0) return static_cast<size_t>(wanted);
  return static_cast<size_t>(limit.rlim_cur);
}

RequestScan scan_request(std::string_view bytes, size_t max_body_bytes) {
  RequestScan scan;
  const size_t end = bytes.find("\r\n\r\n");
  if (end == std::string_view::npos) {
    if (bytes.size() > kMaxHeaderBytes) scan.state = RequestScan::State::HeadersTooLarge;
    return scan;
  }
  if (end + 4 > kMaxHeaderBytes) {
    scan.state = RequestScan::State::HeadersTooLarge;
    return scan;
  }
  scan.header_bytes = end + 4;
  bool has_length = false, expect_continue = false;
  size_t line_begin = bytes.find("\r\n") + 2;  // past the request line
  while (line_begin < end + 2) {
    const size_t line_end = bytes.find("\r\n", line_begin);
    const std::string_view line = bytes.substr(line_begin, line_end - line_begin);
    const size_t colon = line.find(':');
    const std::string_view name = colon == std::string_view::npos ? line : line.substr(0, colon);
    const std::string_view value = colon == std::string_view::npos ? "" : trim(line.substr(colon + 1));
    if (same_name(name, "Content-Length")) {
      // One decimal number, given once (or repeated with the same value).
      size_t length = 0;
      bool valid = !value.empty() && value.size() <= 19;
      for (char c : value) valid = valid && c >= '0' && c <= '9';
      for (char c : value) length = length * 10 + static_cast<size_t>(c - '0');
      if (!valid || (has_length && length != scan.body_bytes)) {
        scan.state = RequestScan::State::BadLength;
        return scan;
      }
      has_length = true;
      scan.body_bytes = length;
    } else if (same_name(name, "Transfer-Encoding")) {
      // Request bodies must say their length: a chunked body could not be waited for here.
      scan.state = RequestScan::State::LengthRequired;
      return scan;
    } else if (same_name(name, "Expect")) {
      if (!same_name(value, "100-continue")) {
        scan.state = RequestScan::State::ExpectationFailed;
        return scan;
      }
      expect_continue = true;
      scan.expect_line_begin = line_begin;
      scan.expect_line_end = line_end + 2;
    }
    line_begin = line_end + 2;
  }
  if (scan.body_bytes > max_body_bytes)
    scan.state = RequestScan::State::TooLarge;
  else if (expect_continue)
    scan.state = RequestScan::State::ContinueThenBody;
  else if (bytes.size() >= scan.header_bytes + scan.body_bytes)
    scan.state = RequestScan::State::Complete;
  return scan;
}

struct ConnectionServer::Connection {
  int fd = -1;
  std::string ip;             // the peer's address
  bool proxied = false;       // the peer is a trusted proxy: counted per forwarded request, not here
  std::string client;         // a forwarded request's client while it is counted against it
  std::string buffer;         // bytes received and not yet consumed by a request
  Clock::time_point since;    // when it began to wait for its request: the oldest is shed first
  Clock::time_point started;  // when the request being received sent its first byte
  Clock::time_point deadline;
  bool idle = true;        // waiting for a request that has not started (keep-alive)
  bool lingering = false;  // answered and half-closed: dropping what still arrives
  int served = 0;
};

namespace {

// httplib's view of one request: the bytes the poller gathered, nothing past them (the next
// request's bytes stay in the buffer), and writes to the socket within the write timeout.
class ConnectionStream final : public httplib::Stream {
 public:
  ConnectionStream(int fd, const std::string& bytes, size_t end, int write_timeout_ms)
      : fd_(fd), bytes_(bytes), end_(end), write_timeout_ms_(write_timeout_ms) {}
  size_t consumed() const { return offset_; }

  bool is_readable() const override { return offset_ < end_; }
  bool is_writable() const override {
    pollfd p{fd_, POLLOUT, 0};
    return ::poll(&p, 1, write_timeout_ms_) > 0 && (p.revents & POLLOUT) && peer_alive(fd_);
  }
  ssize_t read(char* ptr, size_t size) override {
    const size_t n = std::min(size, end_ - offset_);
    std::memcpy(ptr, bytes_.data() + offset_, n);
    offset_ += n;
    return static_cast<ssize_t>(n);
  }
  ssize_t write(const char* ptr, size_t size) override {
    pollfd p{fd_, POLLOUT, 0};
    if (::poll(&p, 1, write_timeout_ms_) <= 0 || !(p.revents & POLLOUT)) return -1;
    const ssize_t n = ::send(fd_, ptr, size, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0) return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR ? 0 : -1;
    return n;
  }
  void get_remote_ip_and_port(std::string& ip, int& port) const override { address_of(fd_, true, ip, port); }
  void get_local_ip_and_port(std::string& ip, int& port) const override { address_of(fd_, false, ip, port); }
  // httplib asks for the descriptor only to refuse (500) one that select() could not watch; it
  // never waits on it (every wait is this stream's poll()), so it is not given one.
  socket_t socket() const override { return INVALID_SOCKET; }

 private:
  int fd_;
  const std::string& bytes_;
  size_t end_;
  size_t offset_ = 0;
  int write_timeout_ms_;
};

}  // namespace

ConnectionServer::ConnectionServer(ConnectionLimits limits, std::function<std::string(int)> error_body)
    : limits_(limits), error_body_(std::move(error_body)), wake_fd_(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) {
  new_task_queue = [] { return new InlineQueue(); };
  poller_ = std::thread([this] { poll_loop(); });
  for (size_t i = 0; i < std::max<size_t>(limits_.workers, 1); ++i)
    workers_.emplace_back([this] { worker_loop(); });
}

ConnectionServer::~ConnectionServer() {
  shutdown_connections();
}

void ConnectionServer::widen_backlog(int backlog) {
  ::listen(svr_sock_, backlog);
}

bool ConnectionServer::client_connected() {
  return current_client_fd < 0 || peer_alive(current_client_fd);
}

void ConnectionServer::wake() {
  const uint64_t one = 1;
  [[maybe_unused]] const ssize_t n = ::write(wake_fd_, &one, sizeof one);
}

void ConnectionServer::release(Connection& connection) {
  ::shutdown(connection.fd, SHUT_RDWR);
  ::close(connection.fd);
  end_forwarded(connection);
  std::lock_guard lock(mutex_);
  if (!connection.proxied && --per_ip_[connection.ip] <= 0) per_ip_.erase(connection.ip);
  --connections_;
}

bool ConnectionServer::admit_forwarded(Connection& connection, std::string_view head) {
  const std::string client =
      forwarded_client(connection.ip, joined_header(head, "X-Forwarded-For"), limits_.trusted_proxies);
  std::lock_guard lock(mutex_);
  int& count = per_ip_[client];
  if (limits_.max_connections_per_ip > 0 && count >= limits_.max_connections_per_ip) {
    if (count == 0) per_ip_.erase(client);
    return false;
  }
  ++count;
  connection.client = client;
  return true;
}

void ConnectionServer::end_forwarded(Connection& connection) {
  if (connection.client.empty()) return;
  std::lock_guard lock(mutex_);
  if (--per_ip_[connection.client] <= 0) per_ip_.erase(connection.client);
  connection.client.clear();
}

bool ConnectionServer::process_and_close_socket(socket_t sock) {
  std::string peer;
  int port = 0;
  address_of(sock, true, peer, port);
  const std::string canonical = canonical_address(peer);
  const std::string& ip = canonical.empty() ? peer : canonical;
  const bool proxied = std::any_of(limits_.trusted_proxies.begin(), limits_.trusted_proxies.end(),
                                   [&](const AddressRange& range) { return range.contains(ip); });
  {
    std::lock_guard lock(mutex_);
    // A trusted proxy's connections carry many clients' requests: they are counted per request.
    const bool refused =
        stopping_ || connections_ >= limits_.max_connections + kAcceptOverflow ||
        (!proxied && limits_.max_connections_per_ip > 0 && per_ip_[ip] >= limits_.max_connections_per_ip);
    if (refused) {
      if (!proxied && per_ip_[ip] == 0) per_ip_.erase(ip);
      ::close(sock);
      return false;
    }
    if (!proxied) ++per_ip_[ip];
    ++connections_;
    auto connection = std::make_unique<Connection>();
    connection->fd = sock;
    connection->ip = ip;
    connection->proxied = proxied;
    connection->since = connection->started = Clock::now();
    connection->deadline = connection->since + std::chrono::seconds(limits_.read_timeout_seconds);
    incoming_.push_back(std::move(connection));
  }
  wake();
  return true;
}

void ConnectionServer::wait_for_request(std::unique_ptr<Connection> connection, bool idle) {
  connection->idle = idle;
  connection->since = connection->started = Clock::now();
  connection->deadline =
      connection->since + std::chrono::seconds(idle ? keep_alive_timeout_sec_ : limits_.read_timeout_seconds);
  {
    std::lock_guard lock(mutex_);
    incoming_.push_back(std::move(connection));
  }
  wake();
}

bool ConnectionServer::receive(Connection& connection) {
  char chunk[16384];
  for (;;) {
    const ssize_t n = ::recv(connection.fd, chunk, sizeof chunk, MSG_DONTWAIT);
    if (n == 0) return false;
    if (n < 0) return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR;
    if (connection.lingering) continue;
    connection.buffer.append(chunk, static_cast<size_t>(n));
    if (connection.idle) {
      // The head's deadline counts from its first byte and is never moved: moved on every byte
      // (a timeout between reads), a client sending a byte now and then held its connection for
      // ever.
      connection.idle = false;
      connection.started = Clock::now();
      connection.deadline = connection.started + std::chrono::seconds(limits_.read_timeout_seconds);
    }
    // Enough to decide: the rest waits in the socket until the worker has served this request.
    if (connection.buffer.size() > kMaxHeaderBytes + limits_.max_body_bytes) return true;
  }
}

void ConnectionServer::answer_and_linger(std::unique_ptr<Connection> connection, int status) {
  const std::string body = error_body_(status);
  const std::string reply =
      "HTTP/1.1 " + std::to_string(status) + " " + reason_phrase(status) +
      "\r\nContent-Type: application/json; charset=utf-8\r\nContent-Length: " + std::to_string(body.size()) +
      (status == 429 ? "\r\nRetry-After: 1" : "") + "\r\nConnection: close\r\n\r\n" + body;
  [[maybe_unused]] const ssize_t n =
      ::send(connection->fd, reply.data(), reply.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
  ::shutdown(connection->fd, SHUT_WR);
  connection->lingering = true;
  connection->buffer.clear();
  connection->deadline = Clock::now() + kLinger;
  // Through the poller's inbox: a worker answers too (429), and the waiting list is the poller's.
  {
    std::lock_guard lock(mutex_);
    incoming_.push_back(std::move(connection));
  }
  wake();
}

bool ConnectionServer::dispatch(std::unique_ptr<Connection>& connection) {
  for (;;) {
    const RequestScan scan = scan_request(connection->buffer, limits_.max_body_bytes);
    switch (scan.state) {
      case RequestScan::State::Incomplete:
        if (scan.header_bytes > 0) {
          // The head is in; the body keeps --read-timeout between reads, within its overall time.
          const auto now = Clock::now();
          const auto overall = connection->started + std::chrono::seconds(limits_.read_timeout_seconds) +
                               std::chrono::seconds(scan.body_bytes / kMinBodyBytesPerSecond);
          connection->deadline = std::min(now + std::chrono::seconds(limits_.read_timeout_seconds), overall);
        }
        return false;
      case RequestScan::State::Complete: {
        std::lock_guard lock(mutex_);
        ready_.push_back(std::move(connection));
        work_.notify_one();
        return true;
      }
      case RequestScan::State::ContinueThenBody: {
        // The client waits for this before it sends the body; httplib must not send it again.
        static const char kContinue[] = "HTTP/1.1 100 Continue\r\n\r\n";
        [[maybe_unused]] const ssize_t n =
            ::send(connection->fd, kContinue, sizeof kContinue - 1, MSG_NOSIGNAL | MSG_DONTWAIT);
        connection->buffer.erase(scan.expect_line_begin, scan.expect_line_end - scan.expect_line_begin);
        continue;
      }
      case RequestScan::State::TooLarge:
      case RequestScan::State::HeadersTooLarge:
      case RequestScan::State::BadLength:
      case RequestScan::State::LengthRequired:
      case RequestScan::State::ExpectationFailed:
        answer_and_linger(std::move(connection), refusal_status(scan.state));
        return true;
    }
  }
}

void ConnectionServer::poll_loop() {
  std::vector<pollfd> fds;
  while (!stopping_) {
    std::vector<std::unique_ptr<Connection>> arrived;
    {
      std::lock_guard lock(mutex_);
      arrived.swap(incoming_);
    }
    // A connection handed back with a pipelined request already buffered is decided at once.
    for (auto& connection : arrived)
      if (connection->buffer.empty() || !dispatch(connection)) waiting_.push_back(std::move(connection));
    shed_excess();

    Clock::time_point next = Clock::now() + std::chrono::seconds(1);
    fds.assign(1, pollfd{wake_fd_, POLLIN, 0});
    for (const auto& connection : waiting_) {
      fds.push_back(pollfd{connection->fd, POLLIN, 0});
      next = std::min(next, connection->deadline);
    }
    const auto wait = std::chrono::duration_cast<std::chrono::milliseconds>(next - Clock::now()).count();
    if (::poll(fds.data(), fds.size(), static_cast<int>(std::clamp<int64_t>(wait + 1, 0, 1000))) < 0 &&
        errno != EINTR)
      break;
    if (fds[0].revents & POLLIN) {
      uint64_t count;
      [[maybe_unused]] const ssize_t n = ::read(wake_fd_, &count, sizeof count);
    }

    std::vector<std::unique_ptr<Connection>> polled;
    polled.swap(waiting_);
    const Clock::time_point now = Clock::now();
    for (size_t i = 0; i < polled.size(); ++i) {
      std::unique_ptr<Connection>& connection = polled[i];
      const size_t before = connection->buffer.size();
      if ((fds[i + 1].revents & (POLLIN | POLLHUP | POLLERR)) && !receive(*connection)) {
        // The client has stopped sending (a half-close): the requests that arrived with its last
        // bytes are still answered, and the connection is closed when the poller next sees the
        // end. Dropping them made the answer depend on whether the bytes and the end of the
        // stream happened to arrive in one read.
        if (!connection->lingering && connection->buffer.size() > before && dispatch(connection)) continue;
        release(*connection);
        continue;
      }
      if (connection->lingering) {
        if (now >= connection->deadline)
          release(*connection);
        else
          waiting_.push_back(std::move(connection));
        continue;
      }
      if (connection->buffer.size() > before && dispatch(connection)) continue;
      if (now < connection->deadline) {
        waiting_.push_back(std::move(connection));
      } else if (connection->idle) {
        release(*connection);  // a keep-alive connection that sent nothing more
      } else {
        answer_and_linger(std::move(connection), 408);
      }
    }
  }
  for (auto& connection : waiting_) release(*connection);
  waiting_.clear();
}

void ConnectionServer::shed_excess() {
  size_t excess = 0;
  {
    std::lock_guard lock(mutex_);
    excess = connections_ > limits_.max_connections ? connections_ - limits_.max_connections : 0;
  }
  excess = std::min(excess, waiting_.size());
  if (excess == 0) return;
  // The answered ones first, then the longest waiting: a new client is the last to go, and a
  // crowd of slow ones makes room for it instead of keeping it out. Connections being served
  // are not here and are never shed.
  const auto first_to_go = [](const std::unique_ptr<Connection>& a, const std::unique_ptr<Connection>& b) {
    return std::tuple(!a->lingering, a->since) < std::tuple(!b->lingering, b->since);
  };
  std::partial_sort(waiting_.begin(), waiting_.begin() + static_cast<std::ptrdiff_t>(excess), waiting_.end(),
                    first_to_go);
  for (size_t i = 0; i < excess; ++i) release(*waiting_[i]);
  waiting_.erase(waiting_.begin(), waiting_.begin() + static_cast<std::ptrdiff_t>(excess));
}

void ConnectionServer::worker_loop() {
  for (;;) {
    std::unique_ptr<Connection> connection;
    {
      std::unique_lock lock(mutex_);
      work_.wait(lock, [&] { return stopping_ || !ready_.empty(); });
      if (stopping_) return;
      connection = std::move(ready_.front());
      ready_.pop_front();
    }
    serve(std::move(connection));
  }
}

void ConnectionServer::serve(std::unique_ptr<Connection> connection) {
  current_client_fd = connection->fd;
  for (;;) {
    const RequestScan scan = scan_request(connection->buffer, limits_.max_body_bytes);
    if (scan.state != RequestScan::State::Complete) {
      // The next request has not all arrived (or needs an answer of the poller's own).
      current_client_fd = -1;
      if (stopping_) break;
      const bool idle = connection->buffer.empty();
      wait_for_request(std::move(connection), idle);
      return;
    }
    const size_t end = scan.header_bytes + scan.body_bytes;
    if (connection->proxied &&
        !admit_forwarded(*connection, std::string_view(connection->buffer).substr(0, scan.header_bytes))) {
      current_client_fd = -1;
      answer_and_linger(std::move(connection), 429);
      return;
    }
    ConnectionStream stream(connection->fd, connection->buffer, end, limits_.write_timeout_seconds * 1000);
    const bool last = ++connection->served >= static_cast<int>(keep_alive_max_count_) || stopping_;
    bool closed = false, http10 = false;
    const bool written = process_request(stream, last, closed, [&](httplib::Request& req) {
      // Handlers and logs see the client a trusted proxy forwarded for, not the proxy, and an
      // address in one spelling (an IPv4 peer of a dual-stack socket without its ::ffff: prefix).
      req.remote_addr = connection->client.empty() ? connection->ip : connection->client;
      req.headers.erase("REMOTE_ADDR");
      req.set_header("REMOTE_ADDR", req.remote_addr);
      // A close-delimited response is only safe when the connection then closes.
      if (req.version == "HTTP/1.0") {
        http10 = true;
        req.headers.erase("Connection");
        req.set_header("Connection", "close");
      }
    });
    end_forwarded(*connection);
    // The whole request is consumed, whatever httplib read of it (it leaves unused bodies).
    connection->buffer.erase(0, std::max(stream.consumed(), end));
    if (!written || closed || last || http10 || stopping_ || svr_sock_ == INVALID_SOCKET) break;
  }
  current_client_fd = -1;
  release(*connection);
}

void ConnectionServer::shutdown_connections() {
  {
    std::lock_guard lock(mutex_);
    if (shut_down_) return;
    shut_down_ = true;
    stopping_ = true;
  }
  wake();
  work_.notify_all();
  if (poller_.joinable()) poller_.join();
  for (std::thread& worker : workers_)
    if (worker.joinable()) worker.join();
  std::lock_guard lock(mutex_);
  for (auto& connection : incoming_) {
    ::close(connection->fd);
  }
  for (auto& connection : ready_) ::close(connection->fd);
  incoming_.clear();
  ready_.clear();
  per_ip_.clear();
  if (wake_fd_ >= 0) ::close(wake_fd_);
  wake_fd_ = -1;
}

}  // namespace mb::server

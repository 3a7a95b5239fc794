// SPDX-License-Identifier: MIT
// Raw loopback sockets for the connection-layer tests: a client from any 127.x.y.z (all of them
// are this machine), bytes out, bytes in.
#pragma once

#include <cstddef>
#include <string>

namespace mb::test {

// A connection to 127.0.0.1:`port` from `source`, or -1.
int connect_from(const std::string& source, int port);
// A connection to [::1]:`port`, or -1 (also where the machine has no IPv6 loopback).
int connect_ipv6_loopback(int port);
bool send_all(int fd, const std::string& bytes);
// What arrives within `seconds`, until the server closes or `until` has been received.
std::string receive(int fd, double seconds, const std::string& until = "");
// `count` bytes, or fewer when the server closes or `seconds` pass first.
std::string receive_bytes(int fd, size_t count, double seconds);
// Whether the server has closed the connection (what it sent first is ignored).
bool closed_by_server(int fd);
// Raises this process's soft limit of open descriptors towards `wanted` (at most the hard limit);
// returns the limit now in force.
size_t raise_open_files(size_t wanted);

}  // namespace mb::test

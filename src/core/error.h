// SPDX-License-Identifier: MIT
// Error type for everything driven by user input (files, configs, CLI arguments, requests).
//
// Library code throws mb::Error with a message that names the offending file, tensor, key or
// value; applications catch it at their boundary and turn it into an exit code or an HTTP
// status. Internal invariants use MB_CHECK, which also throws, so a bug never becomes an
// out-of-bounds access in a server that must keep serving.
#pragma once

#include <stdexcept>
#include <string>

namespace mb {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(message) {}
};

[[noreturn]] void throw_check_failure(const char* condition, const char* file, int line);

}  // namespace mb

#define MB_CHECK(cond)                                           \
  do {                                                           \
    if (!(cond)) ::mb::throw_check_failure(#cond, __FILE__, __LINE__); \
  } while (0)

// SPDX-License-Identifier: MIT
// `mambacpp serve` as a child process on 127.0.0.1 and a free port, for the integration tests.
#pragma once

#include <sys/types.h>

#include <string>

namespace mb::test {

class ServerProcess {
 public:
  // Starts `mambacpp serve -m MODEL --host HOST --port 0 ARGS` and waits until /health
  // answers 200; fails the test (and returns with port() == 0) when it does not within a minute.
  // An IPv6 host may be given in brackets ("[::1]") or without.
  ServerProcess(const std::string& model_dir, const std::string& arguments,
                const std::string& host = "127.0.0.1");
  ~ServerProcess();  // SIGKILL if still running
  ServerProcess(const ServerProcess&) = delete;
  ServerProcess& operator=(const ServerProcess&) = delete;

  int port() const { return port_; }
  pid_t pid() const { return pid_; }  // the server's own (or the emulator's running it); -1 once ended
  // Sends SIGTERM and waits; returns the exit status (-1 when killed by a signal or timed out).
  int terminate(int timeout_seconds = 60);
  std::string stdout_text() const;
  std::string stderr_text() const;

 private:
  void start(const std::string& model_dir, const std::string& arguments,
             const std::string& host);  // gtest assertions need a void function
  pid_t pid_ = -1;
  int port_ = 0;
  std::string dir_;
};

// A `mambacpp serve` that is expected to exit by itself (a model that cannot load, a refused
// flag): its exit status (-1 when killed by a signal, or still running after `timeout_seconds`,
// when it is killed), how long it ran and what it wrote to stderr.
struct ServeExit {
  int status = -1;
  double seconds = 0;
  std::string stderr_text;
};
ServeExit serve_until_exit(const std::string& model_path, const std::string& arguments,
                           double timeout_seconds);

// A tiny random checkpoint (made once per test binary with make-model) and its folder.
const std::string& server_test_model();

}  // namespace mb::test

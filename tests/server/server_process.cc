// SPDX-License-Identifier: MIT
#include "server_process.h"

#include <gtest/gtest.h>
#include <httplib.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <sstream>
#include <thread>

#include "common/test_util.h"

extern char** environ;

namespace mb::test {

namespace {

std::string read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// Runs a shell command line (MB_CLI_PATH may start with an emulator) and returns its pid.
pid_t spawn_shell(const std::string& command) {
  pid_t pid = -1;
  const char* argv[] = {"/bin/sh", "-c", command.c_str(), nullptr};
  if (posix_spawn(&pid, "/bin/sh", nullptr, nullptr, const_cast<char**>(argv), environ) != 0) return -1;
  return pid;
}

}  // namespace

ServerProcess::ServerProcess(const std::string& model_dir, const std::string& arguments,
                             const std::string& host)
    : dir_(make_temp_dir("serve")) {
  start(model_dir, arguments, host);
}

void ServerProcess::start(const std::string& model_dir, const std::string& arguments,
                          const std::string& host) {
  // exec, so that the pid is the server's own and SIGTERM reaches it rather than the shell.
  pid_ = spawn_shell("exec " + std::string(MB_CLI_PATH) + " serve -m " + model_dir + " --host '" + host +
                     "' --port 0 " + arguments + " >" + dir_ + "/out.txt 2>" + dir_ + "/err.txt");
  ASSERT_GT(pid_, 0);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  // The URL spells an IPv6 host in brackets.
  const bool bracketed = host.front() == '[';
  const std::string bare = bracketed ? host.substr(1, host.size() - 2) : host;
  const bool ipv6 = bare.find(':') != std::string::npos;
  const std::string marker = "listening on http://" + (ipv6 ? "[" + bare + "]" : bare) + ":";
  while (port_ == 0 && std::chrono::steady_clock::now() < deadline) {
    const std::string out = read_all(dir_ + "/out.txt");
    const size_t at = out.find(marker);
    if (at != std::string::npos && out.find('\n', at) != std::string::npos)
      port_ = std::stoi(out.substr(at + marker.size()));
    else if (waitpid(pid_, nullptr, WNOHANG) == pid_) {
      pid_ = -1;
      FAIL() << "the server exited: " << stderr_text();
    } else
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ASSERT_GT(port_, 0) << "no port: " << stderr_text();
  httplib::Client client(bare, port_);
  while (std::chrono::steady_clock::now() < deadline) {
    const auto health = client.Get("/health");
    if (health && health->status == 200) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  port_ = 0;
  FAIL() << "/health never answered 200: " << stderr_text();
}

ServerProcess::~ServerProcess() {
  if (pid_ > 0) {
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
  }
}

int ServerProcess::terminate(int timeout_seconds) {
  if (pid_ <= 0) return -1;
  kill(pid_, SIGTERM);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_seconds);
  int status = 0;
  while (waitpid(pid_, &status, WNOHANG) != pid_) {
    if (std::chrono::steady_clock::now() > deadline) return -1;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  pid_ = -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

std::string ServerProcess::stdout_text() const {
  return read_all(dir_ + "/out.txt");
}
std::string ServerProcess::stderr_text() const {
  return read_all(dir_ + "/err.txt");
}

ServeExit serve_until_exit(const std::string& model_path, const std::string& arguments,
                           double timeout_seconds) {
  const std::string dir = make_temp_dir("serve_exit");
  const auto start = std::chrono::steady_clock::now();
  const pid_t pid =
      spawn_shell("exec " + std::string(MB_CLI_PATH) + " serve -m " + model_path +
                  " --host 127.0.0.1 --port 0 " + arguments + " >" + dir + "/out.txt 2>" + dir + "/err.txt");
  ServeExit result;
  if (pid <= 0) return result;
  const auto deadline = start + std::chrono::duration<double>(timeout_seconds);
  int status = 0;
  bool exited = false;
  while (!(exited = waitpid(pid, &status, WNOHANG) == pid) && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (!exited) {
    kill(pid, SIGKILL);
    waitpid(pid, nullptr, 0);
  } else if (WIFEXITED(status)) {
    result.status = WEXITSTATUS(status);
  }
  result.stderr_text = read_all(dir + "/err.txt");
  return result;
}

const std::string& server_test_model() {
  static const std::string dir = [] {
    const std::string d = make_temp_dir("serve_model") + "/tiny";
    const std::string command = std::string(MB_CLI_PATH) + " make-model --out " + d +
                                " --d-model 32 --n-layer 2 --vocab 301 --seed 3 >/dev/null";
    EXPECT_EQ(std::system(command.c_str()), 0);
    return d;
  }();
  return dir;
}

}  // namespace mb::test

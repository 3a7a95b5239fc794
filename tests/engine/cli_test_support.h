// SPDX-License-Identifier: MIT
// Running the mambacpp CLI from a test: its exit status and what it wrote on stdout and stderr.
#pragma once

#include <cstdlib>
#include <string>

#include "common/test_util.h"
#include "io/file_io.h"

namespace mb::test {

struct CliOutput {
  int status;
  std::string out, err;
};

// Runs `MB_CLI_PATH arguments` through the shell; `prefix` is shell text before the command
// (a `ulimit`, a `timeout 10`).
inline CliOutput run_cli(const std::string& arguments, const std::string& prefix = "") {
  const std::string dir = make_temp_dir("cli_run");
  const std::string command =
      prefix + std::string(MB_CLI_PATH) + " " + arguments + " >" + dir + "/out.txt 2>" + dir + "/err.txt";
  const int status = std::system(command.c_str());
  return {status, read_text_file(dir + "/out.txt"), read_text_file(dir + "/err.txt")};
}

}  // namespace mb::test

// SPDX-License-Identifier: MIT
// The lines `mambacpp chat` reads: on a terminal, through libedit when the build has it (arrow
// keys, Ctrl-A/Ctrl-E, the session's history with the up and down arrows, as llama-cli and
// `ollama run` edit lines); otherwise, and always from a pipe or a file, plain lines from stdin.
#pragma once

#include <string>

namespace mb::cli {

class LineReader {
 public:
  // `terminal`: stdin is a terminal, so a prompt is shown (and libedit used where built).
  explicit LineReader(bool terminal);
  ~LineReader();
  LineReader(const LineReader&) = delete;
  LineReader& operator=(const LineReader&) = delete;

  // One line without its line ending, after showing `prompt` on a terminal; false at the end of
  // the input.
  bool read_line(const char* prompt, std::string& line);
  // Remembers a line the user sent, for the up arrow (libedit only; nothing otherwise).
  void remember(const std::string& line);
  // True when lines are edited with libedit.
  bool editing() const { return editing_; }

 private:
  bool terminal_ = false;
  bool editing_ = false;
};

}  // namespace mb::cli

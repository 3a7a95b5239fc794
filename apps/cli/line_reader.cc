// SPDX-License-Identifier: MIT
#include "line_reader.h"

#include <cstdio>
#include <cstdlib>
#include <iostream>

#ifdef MB_HAVE_LIBEDIT
#include <editline/readline.h>
#endif

namespace mb::cli {

LineReader::LineReader(bool terminal) : terminal_(terminal) {
#ifdef MB_HAVE_LIBEDIT
  editing_ = terminal;
  // History lives for the session only: a chat's messages are not written to a file unasked.
  if (editing_) using_history();
#endif
}

LineReader::~LineReader() {
#ifdef MB_HAVE_LIBEDIT
  if (editing_) clear_history();
#endif
}

bool LineReader::read_line(const char* prompt, std::string& line) {
  line.clear();
#ifdef MB_HAVE_LIBEDIT
  if (editing_) {
    char* read = readline(prompt);
    if (read == nullptr) return false;
    line = read;
    std::free(read);
    return true;
  }
#endif
  if (terminal_) {
    std::fputs(prompt, stdout);
    std::fflush(stdout);
  }
  if (!std::getline(std::cin, line)) return false;
  if (!line.empty() && line.back() == '\r') line.pop_back();
  return true;
}

void LineReader::remember(const std::string& line) {
#ifdef MB_HAVE_LIBEDIT
  if (editing_ && !line.empty()) add_history(line.c_str());
#else
  (void)line;
#endif
}

}  // namespace mb::cli

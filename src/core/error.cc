// SPDX-License-Identifier: MIT
#include "core/error.h"

namespace mb {

void throw_check_failure(const char* condition, const char* file, int line) {
  throw Error(std::string("internal check failed: ") + condition + " at " + file + ":" + std::to_string(line));
}

}  // namespace mb

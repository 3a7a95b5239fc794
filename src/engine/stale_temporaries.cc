// SPDX-License-Identifier: MIT
#include "engine/stale_temporaries.h"

#include <dirent.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>

namespace mb {

bool is_temporary_name(std::string_view name) {
  constexpr std::string_view kMark = ".tmp-";
  const size_t mark = name.rfind(kMark);
  if (mark == std::string_view::npos || name.size() != mark + kMark.size() + 16) return false;
  return std::all_of(name.begin() + static_cast<std::ptrdiff_t>(mark + kMark.size()), name.end(),
                     [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

int64_t wall_clock_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

bool is_stale_temporary(const struct stat& info, int64_t now_ns) {
  const int64_t mtime = static_cast<int64_t>(info.st_mtim.tv_sec) * 1'000'000'000 + info.st_mtim.tv_nsec;
  return now_ns - mtime >= kStaleTemporaryNs;
}

uint64_t reclaim_stale_temporaries(const std::string& folder) {
  DIR* dir = ::opendir(folder.c_str());
  if (dir == nullptr) return 0;
  const int64_t now = wall_clock_ns();
  uint64_t removed = 0;
  while (const dirent* entry = ::readdir(dir)) {
    if (!is_temporary_name(entry->d_name)) continue;
    const std::string path = folder + "/" + entry->d_name;
    struct stat info {};
    if (::lstat(path.c_str(), &info) != 0 || !S_ISREG(info.st_mode) || !is_stale_temporary(info, now))
      continue;
    if (::unlink(path.c_str()) == 0) ++removed;
  }
  ::closedir(dir);
  return removed;
}

}  // namespace mb

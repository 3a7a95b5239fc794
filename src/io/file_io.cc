// SPDX-License-Identifier: MIT
#include "io/file_io.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <random>

#include "core/error.h"

namespace mb {
namespace {

// What a non-regular file is, for "is a ..." messages.
const char* file_kind(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO (named pipe)";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a regular file";
}

std::string errno_text(int error) {
  if (error == ELOOP) return "too many levels of symbolic links (a symlink loop?)";
  return std::strerror(error);
}

// 16 random hex digits: the suffix of a temporary's name, unguessable by another user.
std::string random_suffix() {
  std::random_device device;
  const uint64_t value = (uint64_t{device()} << 32) ^ device();
  char text[17];
  std::snprintf(text, sizeof text, "%016llx", static_cast<unsigned long long>(value));
  return text;
}

// Writes all of `bytes` to `fd`, retrying short writes and interrupted calls; returns errno on
// failure and 0 on success.
int write_all(int fd, std::span<const uint8_t> bytes) {
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      return errno;
    }
    done += static_cast<size_t>(n);
  }
  return 0;
}

// Makes the rename itself durable. Best effort: some file systems cannot sync a directory, and
// the file's contents are already on disk.
void sync_folder(const std::string& folder) {
  const int fd = ::open(folder.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return;
  ::fsync(fd);
  ::close(fd);
}

}  // namespace

RegularFile::RegularFile(const std::string& path, const std::string& what) {
  const std::string where = "cannot open " + what + " '" + path + "': ";
  // stat first, so a FIFO or a device is refused by its type before any open(), which would
  // block on a FIFO without a writer or have side effects on some devices.
  struct stat info {};
  if (::stat(path.c_str(), &info) != 0) throw Error(where + errno_text(errno));
  if (!S_ISREG(info.st_mode))
    throw Error(where + "it is " + file_kind(info.st_mode) + ", not a regular file");
  // The path may have been replaced since: O_NONBLOCK keeps a FIFO put there from blocking the
  // open, and fstat checks what was actually opened.
  fd_ = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd_ < 0) throw Error(where + errno_text(errno));
  if (::fstat(fd_, &info) != 0 || !S_ISREG(info.st_mode)) {
    const mode_t mode = info.st_mode;
    ::close(fd_);
    throw Error(where + "it is " + file_kind(mode) + ", not a regular file");
  }
  // Reads of a regular file never block anyway; clearing the flag keeps them ordinary.
  ::fcntl(fd_, F_SETFL, ::fcntl(fd_, F_GETFL) & ~O_NONBLOCK);
  size_ = static_cast<uint64_t>(info.st_size);
}

RegularFile::~RegularFile() {
  if (fd_ >= 0) ::close(fd_);
}

std::string describe_bytes(uint64_t bytes) {
  const char* units[] = {"bytes", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  int unit = 0;
  double value = static_cast<double>(bytes);
  while (value >= 1024 && unit < 6) {
    value /= 1024;
    ++unit;
  }
  char text[32];
  if (unit == 0 || value == static_cast<double>(static_cast<uint64_t>(value)))
    std::snprintf(text, sizeof text, "%.0f %s", value, units[unit]);
  else
    std::snprintf(text, sizeof text, "%.1f %s", value, units[unit]);
  return text;
}

std::string read_file_limited(const std::string& path, size_t max_bytes, const std::string& what) {
  const RegularFile file(path, what);
  const std::string too_large = "cannot read " + what + " '" + path + "': it is larger than the " +
                                describe_bytes(max_bytes) + " limit for a " + what;
  if (file.size() > max_bytes) throw Error(too_large + " (" + describe_bytes(file.size()) + ")");
  // The size is a hint only (files in /proc report 0, a file may grow while read), so the loop
  // reads to the end and stops one byte past the limit.
  std::string contents(static_cast<size_t>(file.size()), '\0');
  size_t done = 0;
  for (;;) {
    if (done == contents.size()) {
      if (contents.size() > max_bytes) throw Error(too_large);
      contents.resize(std::min(max_bytes + 1, std::max<size_t>(contents.size() * 2, 4096)));
    }
    const ssize_t n = ::read(file.fd(), contents.data() + done, contents.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      throw Error("cannot read " + what + " '" + path + "': " + errno_text(errno));
    }
    if (n == 0) break;
    done += static_cast<size_t>(n);
  }
  if (done > max_bytes) throw Error(too_large);
  contents.resize(done);
  return contents;
}

void write_file_atomically(const std::string& path, std::span<const uint8_t> bytes) {
  // The rename below replaces whatever `path` names. For a device or a pipe (say /dev/null, run
  // as root) that would put a regular file in its place, so only regular files are replaced.
  std::error_code status_error;
  const auto status = std::filesystem::status(path, status_error);
  if (std::filesystem::exists(status) && !std::filesystem::is_regular_file(status))
    throw Error("refusing to write '" + path + "': it exists and is not a regular file");
  const std::filesystem::path target(path);
  const std::string folder = target.has_parent_path() ? target.parent_path().string() : ".";
  // O_EXCL | O_NOFOLLOW: a name that exists, as a file or as a symlink to one, is never opened;
  // a collision with another writer's random name (or a planted one) takes the next name.
  std::string temporary;
  int fd = -1;
  for (int attempt = 0; attempt < 100 && fd < 0; ++attempt) {
    temporary = path + ".tmp-" + random_suffix();
    fd = ::open(temporary.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
    if (fd < 0 && errno != EEXIST) break;
  }
  if (fd < 0) throw Error("cannot create a temporary file next to '" + path + "': " + errno_text(errno));
  int error = write_all(fd, bytes);
  if (error == 0 && ::fsync(fd) != 0) error = errno;
  if (::close(fd) != 0 && error == 0) error = errno;
  if (error != 0) {
    ::unlink(temporary.c_str());
    throw Error("cannot write '" + path + "': " + errno_text(error));
  }
  if (::rename(temporary.c_str(), path.c_str()) != 0) {
    error = errno;
    ::unlink(temporary.c_str());
    throw Error("cannot rename '" + temporary + "' to '" + path + "': " + errno_text(error));
  }
  sync_folder(folder);
}

void check_writable_output(const std::string& path, const std::string& what) {
  const std::string where = "cannot write " + what + " '" + path + "': ";
  const std::filesystem::path target(path);
  const std::string folder = target.has_parent_path() ? target.parent_path().string() : ".";
  struct stat info {};
  if (::stat(folder.c_str(), &info) != 0)
    throw Error(where + "folder '" + folder + "': " + errno_text(errno));
  if (!S_ISDIR(info.st_mode)) throw Error(where + "'" + folder + "' is not a folder");
  if (::access(folder.c_str(), W_OK | X_OK) != 0)
    throw Error(where + "folder '" + folder + "' is not writable: " + errno_text(errno));
  if (::stat(path.c_str(), &info) == 0 && !S_ISREG(info.st_mode))
    throw Error(where + "it is " + file_kind(info.st_mode) + ", not a regular file");
}

std::string read_text_file(const std::string& path) {
  return read_file_limited(path, kMaxTextFileBytes, "file");
}

void write_file_atomically(const std::string& path, const std::string& text) {
  write_file_atomically(path, std::span(reinterpret_cast<const uint8_t*>(text.data()), text.size()));
}

}  // namespace mb

// SPDX-License-Identifier: MIT
// Whole-file input and output that untrusted paths cannot turn against the process: every input
// is checked to be a regular file (a FIFO, a device or a directory is refused without blocking)
// and read up to a stated size limit; every output is written to a fresh temporary that no
// symlink can redirect, synced and renamed over its target.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

namespace mb {

// The size limits of files read whole into memory (weights are mapped, not read, and have none).
inline constexpr size_t kMaxPromptFileBytes = size_t{64} << 20;  // -f/--file prompts
inline constexpr size_t kMaxJsonFileBytes = size_t{256} << 20;   // config.json, tokenizer.json, indexes
inline constexpr size_t kMaxTextFileBytes = size_t{256} << 20;   // merges.txt, chat templates

// An open, read-only descriptor of a regular file, closed on destruction.
class RegularFile {
 public:
  // Opens `path` for reading. A path that is missing, a symlink loop, a directory, a FIFO, a
  // device or a socket throws mb::Error saying which, as "cannot read <what> '<path>': ...";
  // a FIFO is opened without blocking, so naming one never waits for a writer.
  RegularFile(const std::string& path, const std::string& what);
  ~RegularFile();
  RegularFile(const RegularFile&) = delete;
  RegularFile& operator=(const RegularFile&) = delete;

  int fd() const { return fd_; }
  uint64_t size() const { return size_; }

 private:
  int fd_ = -1;
  uint64_t size_ = 0;
};

// The contents of the regular file `path`; throws mb::Error naming `what` (e.g. "prompt file")
// and the path when it is not a regular file, cannot be read, or holds more than `max_bytes`
// (the limit is stated in the message).
std::string read_file_limited(const std::string& path, size_t max_bytes, const std::string& what);

// read_file_limited(path, kMaxTextFileBytes, "file"): for files whose kind has no limit of its own.
std::string read_text_file(const std::string& path);

// "1.5 GiB", "64 MiB", "12 bytes": sizes in messages.
std::string describe_bytes(uint64_t bytes);

// Writes `bytes` to `path` through a temporary file and a rename, so a reader never sees a
// half-written file and a failed write leaves any previous file untouched. The temporary has a
// random name in the target's folder and is created with O_EXCL | O_NOFOLLOW, so neither a
// symlink planted there nor a concurrent writer of the same path is ever written through; it is
// synced before the rename and removed on any failure. A target that exists and is not a
// regular file (a device, a FIFO, a directory) is refused.
void write_file_atomically(const std::string& path, std::span<const uint8_t> bytes);
void write_file_atomically(const std::string& path, const std::string& text);

// Throws mb::Error naming `what` (e.g. "--state-out") and the path unless write_file_atomically
// could write `path` now: its folder exists, is a folder and is writable, and `path` is not
// something other than a regular file. Commands call it before long work, so a typo in an
// output path fails at once rather than after the whole generation.
void check_writable_output(const std::string& path, const std::string& what);

}  // namespace mb

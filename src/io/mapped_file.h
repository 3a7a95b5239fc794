// SPDX-License-Identifier: MIT
// Read-only memory mapping of a whole file (RAII). Checkpoint weights are used in place from
// the mapping when their storage dtype is the one requested, so loading costs no copy.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "io/file_io.h"  // write_file_atomically and read_text_file, used with mappings

namespace mb {

class MappedFile {
 public:
  explicit MappedFile(const std::string& path);  // throws mb::Error naming the path
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  std::span<const uint8_t> bytes() const { return {data_, size_}; }
  // Drops the whole pages inside [p, p + n) (a range of this mapping) from the process's
  // resident memory: a later read maps them in again from the file. Loading calls it for a
  // tensor it has copied (quantized, packed), so the source of a large checkpoint is never
  // resident all at once. Ranges outside the mapping are ignored.
  void release(const void* p, size_t n) const;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace mb

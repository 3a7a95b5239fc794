// SPDX-License-Identifier: MIT
#include "io/mapped_file.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "core/error.h"

namespace mb {

MappedFile::MappedFile(const std::string& path) : path_(path) {
  // RegularFile refuses a FIFO or a device without blocking on it.
  const RegularFile file(path, "file");
  size_ = static_cast<size_t>(file.size());
  if (size_ > 0) {
    void* mapping = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, file.fd(), 0);
    if (mapping == MAP_FAILED) {
      const int error = errno;
      throw Error("cannot map '" + path + "': " + std::strerror(error));
    }
    data_ = static_cast<const uint8_t*>(mapping);
  }
}

MappedFile::~MappedFile() {
  if (data_ != nullptr) ::munmap(const_cast<uint8_t*>(data_), size_);
}

void MappedFile::release(const void* p, size_t n) const {
  const auto* begin = static_cast<const uint8_t*>(p);
  if (data_ == nullptr || begin < data_ || n > size_ || begin - data_ > static_cast<ptrdiff_t>(size_ - n))
    return;
  // Only the pages wholly inside the range: a page shared with a neighbouring tensor stays.
  const auto page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  const uintptr_t first = (reinterpret_cast<uintptr_t>(begin) + page - 1) / page * page;
  const uintptr_t last = (reinterpret_cast<uintptr_t>(begin) + n) / page * page;
  // A read-only private file mapping has no modified pages, so dropping them loses nothing; the
  // call is advice, and its failure changes nothing but the resident size.
  if (last > first) ::madvise(reinterpret_cast<void*>(first), last - first, MADV_DONTNEED);
}

}  // namespace mb

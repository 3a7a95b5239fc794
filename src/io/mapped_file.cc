#include "io/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/error.h"

namespace mb {

MappedFile::MappedFile(const std::string& path) : path_(path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw Error("cannot open '" + path + "': " + std::strerror(errno));
  struct stat info {};
  if (::fstat(fd, &info) != 0 || !S_ISREG(info.st_mode)) {
    ::close(fd);
    throw Error("'" + path + "' is not a regular file");
  }
  size_ = static_cast<size_t>(info.st_size);
  if (size_ > 0) {
    void* mapping = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (mapping == MAP_FAILED) {
      const int saved = errno;
      ::close(fd);
      throw Error("cannot map '" + path + "': " + std::strerror(saved));
    }
    data_ = static_cast<const uint8_t*>(mapping);
  }
  ::close(fd);
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

void write_file_atomically(const std::string& path, std::span<const uint8_t> bytes) {
  // The rename below replaces whatever `path` names. For a device or a pipe (say /dev/null, run
  // as root) that would put a regular file in its place, so only regular files are replaced.
  std::error_code status_error;
  const auto status = std::filesystem::status(path, status_error);
  if (std::filesystem::exists(status) && !std::filesystem::is_regular_file(status))
    throw Error("refusing to write '" + path + "': it exists and is not a regular file");
  const std::string temporary = path + ".tmp";
  {
    std::ofstream out(temporary, std::ios::binary | std::ios::trunc);
    if (!out) throw Error("cannot create '" + temporary + "'");
    out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
    out.flush();
    if (!out) {
      std::remove(temporary.c_str());
      throw Error("cannot write '" + temporary + "' (disk full?)");
    }
  }
  if (std::rename(temporary.c_str(), path.c_str()) != 0) {
    std::remove(temporary.c_str());
    throw Error("cannot rename '" + temporary + "' to '" + path + "': " + std::strerror(errno));
  }
}

void write_file_atomically(const std::string& path, const std::string& text) {
  write_file_atomically(path, std::span(reinterpret_cast<const uint8_t*>(text.data()), text.size()));
}

std::string read_text_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error("cannot open '" + path + "'");
  std::ostringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

}  // namespace mb

// SPDX-License-Identifier: MIT
#include "io/npy.h"

#include <algorithm>
#include <cstring>

#include "core/error.h"
#include "io/mapped_file.h"

namespace mb {

void write_npy_f32(const std::string& path, std::span<const float> values,
                   const std::vector<int64_t>& shape) {
  std::string dims;
  int64_t count = 1;
  for (int64_t dim : shape) {
    dims += std::to_string(dim) + ", ";
    count *= dim;
  }
  if (count != static_cast<int64_t>(values.size()))
    throw Error("npy: shape does not match the number of values");
  if (shape.size() > 1)
    dims.resize(dims.size() - 2);  // a 1-D shape keeps its trailing comma: (n,)
  else if (!shape.empty())
    dims.resize(dims.size() - 1);
  std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': (" + dims + "), }";
  // Magic (6) + version (2) + length (2) + header + newline, padded to a multiple of 64.
  while ((10 + header.size() + 1) % 64 != 0) header.push_back(' ');
  header.push_back('\n');
  std::vector<uint8_t> file;
  file.reserve(10 + header.size() + values.size() * 4);
  const uint8_t magic[] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0};
  file.insert(file.end(), magic, magic + 8);
  file.push_back(static_cast<uint8_t>(header.size() & 0xff));
  file.push_back(static_cast<uint8_t>(header.size() >> 8));
  file.insert(file.end(), header.begin(), header.end());
  const auto* bytes = reinterpret_cast<const uint8_t*>(values.data());
  file.insert(file.end(), bytes, bytes + values.size() * 4);
  write_file_atomically(path, file);
}

std::vector<float> read_npy_f32(const std::string& path, std::vector<int64_t>& shape) {
  const MappedFile file(path);
  const auto bytes = file.bytes();
  const std::string where = "'" + path + "'";
  if (bytes.size() < 10 || bytes[0] != 0x93 || std::memcmp(bytes.data() + 1, "NUMPY", 5) != 0)
    throw Error(where + " is not a .npy file");
  const size_t header_size = bytes[8] | (bytes[9] << 8);
  if (10 + header_size > bytes.size()) throw Error(where + " has a truncated header");
  const std::string header(reinterpret_cast<const char*>(bytes.data() + 10), header_size);
  if (header.find("'<f4'") == std::string::npos) throw Error(where + " is not float32");
  const size_t open = header.find('(');
  const size_t close = open == std::string::npos ? std::string::npos : header.find(')', open);
  if (close == std::string::npos) throw Error(where + " has no shape");
  // The shape is a Python tuple of non-negative integers: "(2, 3)", "(5,)" or "()". Each
  // extent and the running product are bounded so that no file can overflow the byte count.
  constexpr uint64_t kMaxElements = uint64_t{1} << 40;
  shape.clear();
  uint64_t count = 1;
  const std::string dims = header.substr(open + 1, close - open - 1);
  size_t pos = 0;
  while (pos < dims.size()) {
    const size_t comma = std::min(dims.find(',', pos), dims.size());
    const size_t first = dims.find_first_not_of(' ', pos);
    if (first < comma) {
      const size_t last = dims.find_last_not_of(' ', comma - 1);
      uint64_t extent = 0;
      for (size_t i = first; i <= last; ++i) {
        if (dims[i] < '0' || dims[i] > '9' || extent > kMaxElements)
          throw Error(where + " has a malformed shape (" + dims + ")");
        extent = extent * 10 + static_cast<uint64_t>(dims[i] - '0');
      }
      if (extent > kMaxElements || (extent != 0 && count > kMaxElements / extent))
        throw Error(where + " has an implausibly large shape (" + dims + ")");
      count *= extent;
      shape.push_back(static_cast<int64_t>(extent));
    }
    pos = comma + 1;
  }
  if (bytes.size() - 10 - header_size != count * 4) throw Error(where + " size does not match its shape");
  std::vector<float> values(count);
  // An empty array's data() may be null, which memcpy forbids even for zero bytes.
  if (count > 0) std::memcpy(values.data(), bytes.data() + 10 + header_size, count * 4);
  return values;
}

}  // namespace mb

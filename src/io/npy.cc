#include "io/npy.h"

#include <cstring>

#include "core/error.h"
#include "io/mapped_file.h"

namespace mb {

void write_npy_f32(const std::string& path, std::span<const float> values, const std::vector<int64_t>& shape) {
  std::string dims;
  int64_t count = 1;
  for (int64_t dim : shape) {
    dims += std::to_string(dim) + ", ";
    count *= dim;
  }
  if (count != static_cast<int64_t>(values.size())) throw Error("npy: shape does not match the number of values");
  if (shape.size() > 1) dims.resize(dims.size() - 2);  // a 1-D shape keeps its trailing comma: (n,)
  else if (!shape.empty()) dims.resize(dims.size() - 1);
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
  if (bytes.size() < 10 || bytes[0] != 0x93 || std::memcmp(bytes.data() + 1, "NUMPY", 5) != 0)
    throw Error("'" + path + "' is not a .npy file");
  const size_t header_size = bytes[8] | (bytes[9] << 8);
  if (10 + header_size > bytes.size()) throw Error("'" + path + "' has a truncated header");
  const std::string header(reinterpret_cast<const char*>(bytes.data() + 10), header_size);
  if (header.find("'<f4'") == std::string::npos) throw Error("'" + path + "' is not float32");
  const size_t open = header.find('('), close = header.find(')');
  if (open == std::string::npos || close == std::string::npos) throw Error("'" + path + "' has no shape");
  shape.clear();
  int64_t count = 1;
  std::string dims = header.substr(open + 1, close - open - 1);
  size_t pos = 0;
  while (pos < dims.size()) {
    const size_t comma = dims.find(',', pos);
    const std::string part = dims.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    if (part.find_first_not_of(' ') != std::string::npos) {
      shape.push_back(std::stoll(part));
      count *= shape.back();
    }
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  if (bytes.size() != 10 + header_size + count * 4) throw Error("'" + path + "' size does not match its shape");
  std::vector<float> values(count);
  std::memcpy(values.data(), bytes.data() + 10 + header_size, count * 4);
  return values;
}

}  // namespace mb

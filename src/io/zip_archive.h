// SPDX-License-Identifier: MIT
// The subset of the ZIP format that torch.save writes: uncompressed ("stored") entries in one
// archive, with ZIP64 records so that files and offsets past 4 GiB work.
//
// Reading only walks the central directory and the local headers to find where each entry's
// bytes lie; the bytes themselves stay in the caller's mapping. Every offset and length read
// from the file is checked against the file size before it is used, and anything outside the
// subset (compression, encryption, several disks) is refused with an mb::Error naming the
// file, so a damaged or hostile archive cannot make the reader touch memory outside the file.
//
// Writing reproduces the layout of PyTorch's own writer (caffe2's PyTorchStreamWriter on top
// of miniz 2.1): each local header carries an extra field of 'Z' bytes with id "FB" that pads
// the entry's data to a 64-byte boundary, a data descriptor follows each non-empty entry,
// times and dates are zero, and the archive always ends with a ZIP64 end-of-central-directory
// record and locator before the classic end record.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace mb {

// CRC-32 as ZIP uses it (reflected polynomial 0xEDB88320). Passing the previous result as
// `crc` continues a running checksum: crc32(b, crc32(a)) == crc32(a followed by b).
uint32_t crc32(std::span<const uint8_t> bytes, uint32_t crc = 0);

struct ZipEntry {
  std::string name;
  uint64_t data_offset = 0;  // where the entry's bytes start in the archive
  uint64_t size = 0;
  uint32_t crc32 = 0;  // as recorded in the central directory
};

// Lists the entries of the archive `bytes`, in central-directory order. `path` names the file
// in error messages. Every entry is stored uncompressed and its bytes lie inside the archive.
std::vector<ZipEntry> read_zip_directory(std::span<const uint8_t> bytes, const std::string& path);

// Builds an archive in memory, entry by entry, the way PyTorch's writer does.
class ZipWriter {
 public:
  void add(const std::string& name, std::span<const uint8_t> data);
  // Appends the central directory and the end records, and returns the whole archive.
  std::vector<uint8_t> finish();

 private:
  std::vector<uint8_t> archive_;
  std::vector<uint8_t> central_directory_;
  uint64_t entry_count_ = 0;
};

}  // namespace mb

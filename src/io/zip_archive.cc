// SPDX-License-Identifier: MIT
#include "io/zip_archive.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <set>

#include "core/error.h"

namespace mb {
namespace {

constexpr uint32_t kLocalHeaderSignature = 0x04034b50;
constexpr uint32_t kCentralHeaderSignature = 0x02014b50;
constexpr uint32_t kDataDescriptorSignature = 0x08074b50;
constexpr uint32_t kEndSignature = 0x06054b50;
constexpr uint32_t kZip64EndSignature = 0x06064b50;
constexpr uint32_t kZip64LocatorSignature = 0x07064b50;
constexpr uint64_t kLocalHeaderSize = 30;
constexpr uint64_t kCentralHeaderSize = 46;
constexpr uint64_t kEndSize = 22;
constexpr uint64_t kZip64EndSize = 56;
constexpr uint64_t kZip64LocatorSize = 20;
constexpr uint16_t kZip64ExtraId = 0x0001;
constexpr uint32_t kSaturated32 = 0xFFFFFFFF;
constexpr uint16_t kSaturated16 = 0xFFFF;
constexpr uint16_t kFlagEncrypted = 0x0001;
constexpr uint16_t kFlagDataDescriptor = 0x0008;
constexpr uint16_t kFlagUtf8Name = 0x0800;
// PyTorch aligns every entry's data to 64 bytes so that tensors can be used from a mapping.
constexpr uint64_t kDataAlignment = 64;

constexpr std::array<uint32_t, 256> make_crc_table() {
  std::array<uint32_t, 256> table{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t c = i;
    for (int bit = 0; bit < 8; ++bit) c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
    table[i] = c;
  }
  return table;
}
constexpr std::array<uint32_t, 256> kCrcTable = make_crc_table();

// An entry name from the file, made safe to quote in a one-line error message.
std::string quoted(const std::string& name) {
  std::string out = "'";
  for (char c : name.substr(0, 120)) out.push_back(c >= 0x20 && c < 0x7f ? c : '?');
  return out + (name.size() > 120 ? "...'" : "'");
}

uint16_t le16(const uint8_t* p) {
  return static_cast<uint16_t>(p[0] | (p[1] << 8));
}
uint32_t le32(const uint8_t* p) {
  return le16(p) | (static_cast<uint32_t>(le16(p + 2)) << 16);
}
uint64_t le64(const uint8_t* p) {
  return le32(p) | (static_cast<uint64_t>(le32(p + 4)) << 32);
}

void put16(std::vector<uint8_t>& out, uint64_t value) {
  for (int i = 0; i < 2; ++i) out.push_back(static_cast<uint8_t>(value >> (8 * i)));
}
void put32(std::vector<uint8_t>& out, uint64_t value) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<uint8_t>(value >> (8 * i)));
}
void put64(std::vector<uint8_t>& out, uint64_t value) {
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<uint8_t>(value >> (8 * i)));
}

// The ZIP64 extended-information extra field: each value is present only when its 32-bit
// field in the header is saturated, in the fixed order size, compressed size, header offset.
std::vector<uint8_t> zip64_extra(const uint64_t* size, const uint64_t* compressed_size,
                                 const uint64_t* header_offset) {
  std::vector<uint8_t> field;
  put16(field, kZip64ExtraId);
  put16(field, 8 * ((size != nullptr) + (compressed_size != nullptr) + (header_offset != nullptr)));
  for (const uint64_t* value : {size, compressed_size, header_offset})
    if (value != nullptr) put64(field, *value);
  return field;
}

struct EndOfDirectory {
  uint64_t record_offset = 0;  // of the record that describes the directory (ZIP64 or classic)
  uint64_t entries = 0;
  uint64_t directory_size = 0;
  uint64_t directory_offset = 0;
};

EndOfDirectory find_end_of_directory(std::span<const uint8_t> bytes, const std::string& path) {
  const uint8_t* p = bytes.data();
  const uint64_t file_size = bytes.size();
  const std::string where = "'" + path + "': ";
  if (file_size < kEndSize)
    throw Error(where + "file of " + std::to_string(file_size) + " bytes is too short to be a zip archive");
  // The end record is the last 22 bytes plus a comment of at most 64 KiB; the record whose
  // comment reaches exactly to the end of the file is the real one.
  uint64_t end = UINT64_MAX;
  const uint64_t lowest = file_size - kEndSize > kSaturated16 ? file_size - kEndSize - kSaturated16 : 0;
  for (uint64_t pos = file_size - kEndSize + 1; pos-- > lowest;) {
    if (le32(p + pos) == kEndSignature && pos + kEndSize + le16(p + pos + 20) == file_size) {
      end = pos;
      break;
    }
  }
  if (end == UINT64_MAX)
    throw Error(where + "no zip end-of-central-directory record (not a zip archive, or truncated)");
  const uint8_t* record = p + end;
  uint64_t disk = le16(record + 4), directory_disk = le16(record + 6), entries_on_disk = le16(record + 8);
  EndOfDirectory result{end, le16(record + 10), le32(record + 12), le32(record + 16)};
  if (end >= kZip64LocatorSize && le32(p + end - kZip64LocatorSize) == kZip64LocatorSignature) {
    const uint8_t* locator = p + end - kZip64LocatorSize;
    const uint64_t zip64_end = le64(locator + 8);
    if (le32(locator + 4) != 0 || le32(locator + 16) > 1)
      throw Error(where + "zip archive spans several disks, which is not supported");
    if (zip64_end > end - kZip64LocatorSize || end - kZip64LocatorSize - zip64_end < kZip64EndSize)
      throw Error(where + "ZIP64 end-of-central-directory offset " + std::to_string(zip64_end) +
                  " is out of range");
    const uint8_t* zip64 = p + zip64_end;
    if (le32(zip64) != kZip64EndSignature)
      throw Error(where + "ZIP64 end-of-central-directory record has a bad signature");
    disk = le32(zip64 + 16);
    directory_disk = le32(zip64 + 20);
    entries_on_disk = le64(zip64 + 24);
    result = {zip64_end, le64(zip64 + 32), le64(zip64 + 40), le64(zip64 + 48)};
  } else if (result.entries == kSaturated16 || result.directory_size == kSaturated32 ||
             result.directory_offset == kSaturated32) {
    throw Error(where + "zip end record points to ZIP64 records that are missing");
  }
  if (disk != 0 || directory_disk != 0 || entries_on_disk != result.entries)
    throw Error(where + "zip archive spans several disks, which is not supported");
  if (result.directory_offset > result.record_offset ||
      result.directory_size > result.record_offset - result.directory_offset) {
    throw Error(where + "zip central directory (offset " + std::to_string(result.directory_offset) + ", " +
                std::to_string(result.directory_size) + " bytes) lies outside the file");
  }
  if (result.entries > result.directory_size / kCentralHeaderSize)
    throw Error(where + "zip central directory claims " + std::to_string(result.entries) +
                " entries but has room for at most " +
                std::to_string(result.directory_size / kCentralHeaderSize));
  return result;
}

// Replaces the saturated 32-bit values of a central header by those of its ZIP64 field.
void apply_zip64_extra(const uint8_t* extra, uint64_t extra_size, uint64_t& size, uint64_t& compressed_size,
                       uint64_t& header_offset, uint64_t& disk_start, const std::string& where) {
  while (extra_size >= 4) {
    const uint16_t id = le16(extra);
    const uint64_t field_size = le16(extra + 2);
    if (field_size > extra_size - 4) throw Error(where + " has an extra field that runs past its header");
    if (id == kZip64ExtraId) {
      const uint8_t* value = extra + 4;
      uint64_t remaining = field_size;
      auto take64 = [&](uint64_t& target) {
        if (remaining < 8) throw Error(where + " has a ZIP64 extra field that is too short");
        target = le64(value);
        value += 8;
        remaining -= 8;
      };
      if (size == kSaturated32) take64(size);
      if (compressed_size == kSaturated32) take64(compressed_size);
      if (header_offset == kSaturated32) take64(header_offset);
      if (disk_start == kSaturated16) {
        if (remaining < 4) throw Error(where + " has a ZIP64 extra field that is too short");
        disk_start = le32(value);
      }
      return;
    }
    extra += 4 + field_size;
    extra_size -= 4 + field_size;
  }
}

}  // namespace

uint32_t crc32(std::span<const uint8_t> bytes, uint32_t crc) {
  crc = ~crc;
  for (uint8_t byte : bytes) crc = kCrcTable[(crc ^ byte) & 0xFF] ^ (crc >> 8);
  return ~crc;
}

std::vector<ZipEntry> read_zip_directory(std::span<const uint8_t> bytes, const std::string& path) {
  const EndOfDirectory end = find_end_of_directory(bytes, path);
  const uint8_t* p = bytes.data();
  const uint64_t file_size = bytes.size();
  const uint64_t directory_end = end.directory_offset + end.directory_size;
  std::vector<ZipEntry> entries;
  entries.reserve(end.entries);
  std::set<std::string> names;
  uint64_t pos = end.directory_offset;
  for (uint64_t index = 0; index < end.entries; ++index) {
    const std::string ordinal = "'" + path + "': zip central directory entry " + std::to_string(index);
    if (directory_end - pos < kCentralHeaderSize)
      throw Error(ordinal + " runs past the end of the directory");
    const uint8_t* header = p + pos;
    if (le32(header) != kCentralHeaderSignature) throw Error(ordinal + " has a bad signature");
    const uint16_t flags = le16(header + 8);
    const uint16_t method = le16(header + 10);
    uint64_t compressed_size = le32(header + 20), size = le32(header + 24);
    const uint64_t name_length = le16(header + 28), extra_length = le16(header + 30),
                   comment_length = le16(header + 32);
    uint64_t disk_start = le16(header + 34), header_offset = le32(header + 42);
    if (directory_end - pos - kCentralHeaderSize < name_length + extra_length + comment_length)
      throw Error(ordinal + " runs past the end of the directory");
    ZipEntry entry;
    entry.name.assign(reinterpret_cast<const char*>(header + kCentralHeaderSize), name_length);
    entry.crc32 = le32(header + 16);
    const std::string where = "'" + path + "': zip entry " + quoted(entry.name);
    apply_zip64_extra(header + kCentralHeaderSize + name_length, extra_length, size, compressed_size,
                      header_offset, disk_start, where);
    if (size == kSaturated32 || compressed_size == kSaturated32 || header_offset == kSaturated32)
      throw Error(where + " needs a ZIP64 extra field but has none");
    if (flags & kFlagEncrypted) throw Error(where + " is encrypted");
    if (method != 0)
      throw Error(where + " is compressed (method " + std::to_string(method) +
                  "); only uncompressed (stored) entries can be read in place");
    if (compressed_size != size)
      throw Error(where + " is stored but its compressed and uncompressed sizes differ");
    if (disk_start != 0) throw Error(where + " starts on another disk");
    if (header_offset > file_size || file_size - header_offset < kLocalHeaderSize)
      throw Error(where + " has its local header offset " + std::to_string(header_offset) +
                  " past the end of the file");
    const uint8_t* local = p + header_offset;
    if (le32(local) != kLocalHeaderSignature) throw Error(where + " has a local header with a bad signature");
    const uint64_t local_name_length = le16(local + 26), local_extra_length = le16(local + 28);
    const uint64_t data = header_offset + kLocalHeaderSize + local_name_length + local_extra_length;
    if (data > file_size || size > file_size - data) {
      throw Error(where + " has data [" + std::to_string(data) + ", +" + std::to_string(size) +
                  ") past the end of the " + std::to_string(file_size) + "-byte file");
    }
    if (local_name_length != name_length ||
        std::memcmp(local + kLocalHeaderSize, header + kCentralHeaderSize, name_length) != 0)
      throw Error(where + " has a local header that names a different entry");
    if (!names.insert(entry.name).second) throw Error(where + " appears twice");
    entry.data_offset = data;
    entry.size = size;
    entries.push_back(std::move(entry));
    pos += kCentralHeaderSize + name_length + extra_length + comment_length;
  }
  return entries;
}

void ZipWriter::add(const std::string& name, std::span<const uint8_t> data) {
  MB_CHECK(name.size() <= kSaturated16);
  const uint64_t header_offset = archive_.size();
  const uint64_t size = data.size();
  const bool large_size = size >= kSaturated32;
  const bool large_offset = header_offset >= kSaturated32;
  const uint64_t zero = 0;
  // miniz writes the local ZIP64 field before it knows the compressed size, so it holds zero.
  std::vector<uint8_t> local_zip64;
  if (large_size || large_offset)
    local_zip64 = zip64_extra(large_size ? &size : nullptr, large_size ? &zero : nullptr,
                              large_offset ? &header_offset : nullptr);
  const uint64_t unpadded = header_offset + kLocalHeaderSize + name.size() + local_zip64.size() + 4;
  const uint64_t padding = (kDataAlignment - unpadded % kDataAlignment) % kDataAlignment;
  const uint16_t flags = kFlagUtf8Name | (size > 0 ? kFlagDataDescriptor : 0);
  const uint32_t checksum = crc32(data);

  // Local header: the CRC and sizes follow the data in a descriptor, as in a streamed write.
  put32(archive_, kLocalHeaderSignature);
  put16(archive_, 0);  // version needed to extract (stored)
  put16(archive_, flags);
  put16(archive_, 0);  // method: stored
  put32(archive_, 0);  // DOS time and date
  put32(archive_, 0);  // CRC-32 (in the descriptor)
  put32(archive_, 0);  // compressed size (in the descriptor)
  put32(archive_, 0);  // uncompressed size (in the descriptor)
  put16(archive_, name.size());
  put16(archive_, local_zip64.size() + 4 + padding);
  archive_.insert(archive_.end(), name.begin(), name.end());
  archive_.insert(archive_.end(), local_zip64.begin(), local_zip64.end());
  archive_.push_back('F');
  archive_.push_back('B');
  put16(archive_, padding);
  archive_.insert(archive_.end(), padding, 'Z');
  archive_.insert(archive_.end(), data.begin(), data.end());
  if (size > 0) {
    put32(archive_, kDataDescriptorSignature);
    put32(archive_, checksum);
    if (local_zip64.empty()) {
      put32(archive_, size);
      put32(archive_, size);
    } else {
      put64(archive_, size);
      put64(archive_, size);
    }
  }

  std::vector<uint8_t> central_zip64;
  if (large_size || large_offset)
    central_zip64 = zip64_extra(large_size ? &size : nullptr, large_size ? &size : nullptr,
                                large_offset ? &header_offset : nullptr);
  std::vector<uint8_t>& central = central_directory_;
  put32(central, kCentralHeaderSignature);
  put16(central, 0);  // version made by
  put16(central, 0);  // version needed to extract
  put16(central, flags);
  put16(central, 0);  // method: stored
  put32(central, 0);  // DOS time and date
  put32(central, checksum);
  put32(central, std::min<uint64_t>(size, kSaturated32));
  put32(central, std::min<uint64_t>(size, kSaturated32));
  put16(central, name.size());
  put16(central, central_zip64.size());
  put16(central, 0);  // comment length
  put16(central, 0);  // disk number start
  put16(central, 0);  // internal attributes
  put32(central, 0);  // external attributes
  put32(central, std::min<uint64_t>(header_offset, kSaturated32));
  central.insert(central.end(), name.begin(), name.end());
  central.insert(central.end(), central_zip64.begin(), central_zip64.end());
  ++entry_count_;
}

std::vector<uint8_t> ZipWriter::finish() {
  const uint64_t directory_offset = archive_.size();
  const uint64_t directory_size = central_directory_.size();
  archive_.insert(archive_.end(), central_directory_.begin(), central_directory_.end());
  const uint64_t zip64_end_offset = archive_.size();
  put32(archive_, kZip64EndSignature);
  put64(archive_, kZip64EndSize - 12);  // size of the rest of the record
  put16(archive_, 0x031E);              // version made by, as miniz writes it
  put16(archive_, 0x002D);              // version needed: 4.5, ZIP64
  put32(archive_, 0);                   // this disk
  put32(archive_, 0);                   // disk with the directory
  put64(archive_, entry_count_);
  put64(archive_, entry_count_);
  put64(archive_, directory_size);
  put64(archive_, directory_offset);
  put32(archive_, kZip64LocatorSignature);
  put32(archive_, 0);  // disk with the ZIP64 end record
  put64(archive_, zip64_end_offset);
  put32(archive_, 1);  // total disks
  put32(archive_, kEndSignature);
  put16(archive_, 0);
  put16(archive_, 0);
  put16(archive_, std::min<uint64_t>(entry_count_, kSaturated16));
  put16(archive_, std::min<uint64_t>(entry_count_, kSaturated16));
  put32(archive_, std::min<uint64_t>(directory_size, kSaturated32));
  put32(archive_, std::min<uint64_t>(directory_offset, kSaturated32));
  put16(archive_, 0);  // comment length
  central_directory_.clear();
  entry_count_ = 0;
  return std::move(archive_);
}

}  // namespace mb

// SPDX-License-Identifier: MIT
// MappedFile::release: dropping a copied tensor's pages from resident memory never changes what
// the mapping reads, and ranges outside the mapping (heap memory) are left alone.
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <vector>

#include "common/test_util.h"
#include "io/mapped_file.h"

namespace mb {
namespace {

TEST(MappedFile, ReleasedPagesReadTheFileAgain) {
  const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  std::vector<uint8_t> content(5 * page + 123);
  for (size_t i = 0; i < content.size(); ++i) content[i] = static_cast<uint8_t>(i * 131 + 7);
  const std::string path = test::make_temp_dir("mapped_file") + "/data.bin";
  write_file_atomically(path, content);
  const MappedFile file(path);
  const std::span<const uint8_t> bytes = file.bytes();
  ASSERT_EQ(bytes.size(), content.size());
  ASSERT_TRUE(std::equal(bytes.begin(), bytes.end(), content.begin()));
  // An unaligned range covering whole pages in its middle, then the whole file.
  file.release(bytes.data() + page / 2, 3 * page);
  EXPECT_TRUE(std::equal(bytes.begin(), bytes.end(), content.begin()));
  file.release(bytes.data(), bytes.size());
  EXPECT_TRUE(std::equal(bytes.begin(), bytes.end(), content.begin()));
  // Memory that is not part of the mapping is never advised away.
  std::vector<uint8_t> heap(4 * page, 0x5a);
  file.release(heap.data(), heap.size());
  EXPECT_EQ(std::count(heap.begin(), heap.end(), 0x5a), static_cast<ptrdiff_t>(heap.size()));
  // Ranges that run past the mapping's end are ignored too.
  file.release(bytes.data() + page, bytes.size());
  EXPECT_TRUE(std::equal(bytes.begin(), bytes.end(), content.begin()));
  std::filesystem::remove_all(std::filesystem::path(path).parent_path());
}

}  // namespace
}  // namespace mb

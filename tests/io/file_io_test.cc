// SPDX-License-Identifier: MIT
// Whole-file reads and writes (io/file_io.h): outputs go through unique temporaries no symlink
// can redirect, and inputs are regular files read within a stated limit, never blocking on a
// FIFO or reading a device forever.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <functional>
#include <thread>

#include "common/test_util.h"
#include "core/error.h"
#include "io/file_io.h"
#include "io/mapped_file.h"

namespace mb {
namespace {

namespace fs = std::filesystem;

using test::error_of;
using test::write_bytes;

// The names in `dir`, to show that no temporary is left behind.
std::vector<std::string> names_in(const std::string& dir) {
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(dir)) names.push_back(entry.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

// `ln -s victim.txt l.npy.tmp; mambacpp logits ... --out l.npy` used to overwrite victim.txt:
// the temporary was the fixed name `<out>.tmp`, opened with O_TRUNC through any symlink.
TEST(AtomicWrite, ASymlinkAtTheOldTemporaryNameIsNotFollowed) {
  const std::string dir = test::make_temp_dir("atomic_symlink");
  write_bytes(dir + "/victim.txt", "precious");
  fs::create_symlink(dir + "/victim.txt", dir + "/l.npy.tmp");
  write_file_atomically(dir + "/l.npy", std::string("output"));
  EXPECT_EQ(read_text_file(dir + "/victim.txt"), "precious");
  EXPECT_EQ(read_text_file(dir + "/l.npy"), "output");
  EXPECT_TRUE(fs::is_symlink(dir + "/l.npy.tmp"));
  EXPECT_EQ(names_in(dir), (std::vector<std::string>{"l.npy", "l.npy.tmp", "victim.txt"}));
  // A target that is itself a symlink is replaced by the new file; what it pointed at is kept.
  fs::create_symlink(dir + "/victim.txt", dir + "/link.npy");
  write_file_atomically(dir + "/link.npy", std::string("new"));
  EXPECT_FALSE(fs::is_symlink(dir + "/link.npy"));
  EXPECT_EQ(read_text_file(dir + "/link.npy"), "new");
  EXPECT_EQ(read_text_file(dir + "/victim.txt"), "precious");
  fs::remove_all(dir);
}

// Two writers of one path used to share `<out>.tmp`: one failed with "cannot rename" and the
// file could hold a mix of both. Each now has its own temporary, so both succeed and the file
// is one writer's complete output.
TEST(AtomicWrite, ConcurrentWritersOfOnePathBothSucceedWithOneCompleteFile) {
  const std::string dir = test::make_temp_dir("atomic_concurrent");
  const std::string path = dir + "/out.bin";
  const std::string a(1 << 18, 'a'), b(1 << 18, 'b');
  std::atomic<int> failures{0};
  std::atomic<bool> go{false};
  auto writer = [&](const std::string& contents) {
    while (!go) std::this_thread::yield();
    for (int i = 0; i < 10; ++i) {
      try {
        write_file_atomically(path, contents);
      } catch (const Error&) {
        ++failures;
      }
    }
  };
  std::thread first(writer, a), second(writer, b);
  go = true;
  first.join();
  second.join();
  EXPECT_EQ(failures, 0);
  const std::string result = read_text_file(path);
  EXPECT_TRUE(result == a || result == b) << "a mixed or truncated file of " << result.size() << " bytes";
  EXPECT_EQ(names_in(dir), std::vector<std::string>{"out.bin"});
  fs::remove_all(dir);
}

// A write that fails half way (here at a file size limit, as on a full disk) removes its
// temporary and leaves the previous file as it was.
TEST(AtomicWrite, AFailedWriteLeavesNoTemporaryAndThePreviousFile) {
  const std::string dir = test::make_temp_dir("atomic_failure");
  write_file_atomically(dir + "/kept", std::string("before"));
  rlimit saved{};
  ASSERT_EQ(getrlimit(RLIMIT_FSIZE, &saved), 0);
  const auto previous_handler = std::signal(SIGXFSZ, SIG_IGN);  // EFBIG instead of the signal
  rlimit small = saved;
  small.rlim_cur = 4096;
  ASSERT_EQ(setrlimit(RLIMIT_FSIZE, &small), 0);
  const std::string message =
      error_of([&] { write_file_atomically(dir + "/kept", std::string(1 << 20, 'x')); });
  setrlimit(RLIMIT_FSIZE, &saved);
  std::signal(SIGXFSZ, previous_handler);
  EXPECT_NE(message.find("cannot write '" + dir + "/kept'"), std::string::npos) << message;
  EXPECT_EQ(read_text_file(dir + "/kept"), "before");
  EXPECT_EQ(names_in(dir), std::vector<std::string>{"kept"});
  fs::remove_all(dir);
}

// `-f /dev/zero` and a config.json or --tokenizer that is /dev/zero read until memory ran out.
TEST(BoundedRead, DevicesDirectoriesAndLoopsAreRefusedByKind) {
  const std::string dir = test::make_temp_dir("bounded_kinds");
  fs::create_symlink(dir + "/b", dir + "/a");
  fs::create_symlink(dir + "/a", dir + "/b");
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"/dev/zero", "it is a character device, not a regular file"},
      {dir, "it is a directory, not a regular file"},
      {dir + "/a", "symlink loop"},
      {dir + "/missing", "No such file or directory"},
  };
  for (const auto& [path, fragment] : cases) {
    const std::string message = error_of([&] { read_file_limited(path, 1 << 20, "prompt file"); });
    EXPECT_NE(message.find("prompt file '" + path + "'"), std::string::npos) << message;
    EXPECT_NE(message.find(fragment), std::string::npos) << message;
    // Mapped inputs (weights, state files) are checked the same way.
    EXPECT_NE(error_of([&] { MappedFile file(path); }).find(fragment), std::string::npos) << path;
  }
  fs::remove_all(dir);
}

// A FIFO given as -f, --tokenizer or --state-in used to block forever in open(). If a
// regression blocks again, the test opens the FIFO as a writer after 5 s, which ends the read
// (at end of file), and fails instead of hanging.
TEST(BoundedRead, AFifoIsRefusedWithoutWaitingForAWriter) {
  const std::string dir = test::make_temp_dir("bounded_fifo");
  const std::string fifo = dir + "/pipe";
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  for (const bool mapped : {false, true}) {
    std::atomic<bool> done{false};
    std::string message;
    std::thread reader([&] {
      message = mapped ? error_of([&] { MappedFile file(fifo); })
                       : error_of([&] { read_file_limited(fifo, 1 << 20, "tokenizer file"); });
      done = true;
    });
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (!done && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    const bool blocked = !done;
    if (blocked) ::close(::open(fifo.c_str(), O_RDWR | O_NONBLOCK));
    reader.join();
    EXPECT_FALSE(blocked) << "opening a FIFO blocked";
    EXPECT_NE(message.find("it is a FIFO (named pipe), not a regular file"), std::string::npos) << message;
  }
  fs::remove_all(dir);
}

// `-f` on a 50 GB sparse file read until memory ran out; the limit is now stated in the error,
// decided from the size before any read.
TEST(BoundedRead, FilesOverTheLimitAreRefusedWithTheLimitInTheMessage) {
  const std::string dir = test::make_temp_dir("bounded_size");
  const std::string sparse = dir + "/sparse.txt";
  write_bytes(sparse, "");
  fs::resize_file(sparse, uint64_t{50} << 30);
  std::string message = error_of([&] { read_file_limited(sparse, kMaxPromptFileBytes, "prompt file"); });
  EXPECT_NE(message.find("larger than the 64 MiB limit for a prompt file (50 GiB)"), std::string::npos)
      << message;
  write_bytes(dir + "/small.txt", std::string(101, 'x'));
  message = error_of([&] { read_file_limited(dir + "/small.txt", 100, "prompt file"); });
  EXPECT_NE(message.find("larger than the 100 bytes limit"), std::string::npos) << message;
  EXPECT_EQ(read_file_limited(dir + "/small.txt", 101, "prompt file"), std::string(101, 'x'));
  // Files that report no size (as /proc does) are still read to the end, within the limit.
  EXPECT_FALSE(read_file_limited("/proc/self/status", 1 << 20, "file").empty());
  fs::remove_all(dir);
}

}  // namespace
}  // namespace mb

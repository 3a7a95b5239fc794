// SPDX-License-Identifier: MIT
// The CLI against careless and hostile input (issue 21): outputs that symlinks cannot redirect,
// flags that cannot exhaust memory, inputs that cannot block or be read forever, and errors that
// say what is wrong. Each case is the reproducer of a finding.
#include <gtest/gtest.h>

#include <sys/stat.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>

#include "cli_test_support.h"
#include "common/test_util.h"
#include "io/npy.h"

namespace mb {
namespace {

namespace fs = std::filesystem;
using test::CliOutput;
using test::run_cli;

// A tiny model of `arch`, made once per test binary.
const std::string& model_of(const std::string& arch) {
  static std::map<std::string, std::string> made;
  auto it = made.find(arch);
  if (it == made.end()) {
    const std::string dir = test::make_temp_dir("cli_hardening_" + arch) + "/model";
    const CliOutput out = run_cli("make-model --out " + dir + " --arch " + arch +
                                  " --d-model 32 --n-layer 1 --vocab 301 --seed 1");
    EXPECT_EQ(out.status, 0) << out.err;
    it = made.emplace(arch, dir).first;
  }
  return it->second;
}

// Asserts that `out` failed with exactly one line on stderr, "error: ..." holding `fragment`.
void expect_one_line_error(const CliOutput& out, const std::string& fragment, const std::string& what) {
  EXPECT_NE(out.status, 0) << what;
  // An error exits 1 (CLI11's parse errors 100-110); the shell reports an abort as 128 + the
  // signal and `timeout` a command that hung as 124.
  const int code = WIFEXITED(out.status) ? WEXITSTATUS(out.status) : -1;
  EXPECT_TRUE(code >= 1 && code < 124) << what << ": exit status " << code << "\n" << out.err;
  EXPECT_EQ(out.err.rfind("error: ", 0), 0u) << what << "\n" << out.err;
  EXPECT_NE(out.err.find(fragment), std::string::npos) << what << "\n" << out.err;
  EXPECT_EQ(std::count(out.err.begin(), out.err.end(), '\n'), 1) << what << "\n" << out.err;
}

// `ln -s victim.txt l.npy.tmp; mambacpp logits ... --out l.npy` overwrote victim.txt.
TEST(CliHardening, OutputsDoNotFollowASymlinkAtTheOldTemporaryName) {
  const std::string dir = test::make_temp_dir("cli_symlink");
  std::ofstream(dir + "/victim.txt") << "precious";
  fs::create_symlink(dir + "/victim.txt", dir + "/l.npy.tmp");
  const CliOutput out =
      run_cli("logits -m " + model_of("mamba1") + " --tokens 1,2,3 --out " + dir + "/l.npy");
  ASSERT_EQ(out.status, 0) << out.err;
  EXPECT_EQ(read_text_file(dir + "/victim.txt"), "precious");
  std::vector<int64_t> shape;
  read_npy_f32(dir + "/l.npy", shape);
  EXPECT_EQ(shape, (std::vector<int64_t>{1, 301}));
}

// `--ssd-chunk 1000000000` (and 100000) on Mamba-2 and Mamba-3 `logits` and `bench` ended in
// std::terminate on bad_alloc: the SSD kernels allocated scratch quadratic in the chunk. The flag
// is bounded as a config's chunk_size is, and the kernels clamp the chunk to the input, which
// changes no bits: a chunk at least as long as the input is one chunk either way.
TEST(CliHardening, SsdChunksAreBoundedAndClampedToTheInput) {
  for (const std::string arch : {"mamba2", "mamba3"}) {
    SCOPED_TRACE(arch);
    const std::string dir = test::make_temp_dir("cli_ssd_chunk");
    const std::string base =
        "logits -m " + model_of(arch) + " --tokens 1,2,3,4,5 --all-positions --scan chunked ";
    for (const std::string chunk : {"5", "65536"}) {
      const CliOutput out = run_cli(base + "--ssd-chunk " + chunk + " --out " + dir + "/c" + chunk + ".npy");
      ASSERT_EQ(out.status, 0) << chunk << ": " << out.err;
    }
    std::vector<int64_t> shape;
    EXPECT_TRUE(
        test::same_bits(read_npy_f32(dir + "/c5.npy", shape), read_npy_f32(dir + "/c65536.npy", shape)));
    const CliOutput bench =
        run_cli("bench -m " + model_of(arch) +
                " --prompt-len 8 --gen-len 1 --repeats 1 --scan chunked --ssd-chunk 65536");
    EXPECT_EQ(bench.status, 0) << bench.err;
    for (const std::string& command :
         {base + "--out " + dir + "/x.npy", "bench -m " + model_of(arch) + " "}) {
      expect_one_line_error(run_cli(command + " --ssd-chunk 1000000000"),
                            "--ssd-chunk must be in [0, 65536] (0 = the config's chunk_size), got 1000000000",
                            command);
    }
  }
}

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr bool kSanitized = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
constexpr bool kSanitized = true;
#else
constexpr bool kSanitized = false;
#endif
#else
constexpr bool kSanitized = false;
#endif

// An allocation that fails (here under a 600 MB address-space limit, as a 232 GB sparse model
// did without one) was a bare "std::bad_alloc" or an abort; it is one line naming the command.
TEST(CliHardening, RunningOutOfMemoryIsAOneLineErrorNamingTheCommand) {
  if (kSanitized) GTEST_SKIP() << "sanitizers reserve more address space than the limit";
  const std::string dir = test::make_temp_dir("cli_oom");
  const CliOutput out = run_cli("make-model --out " + dir + "/big --d-model 8192 --vocab 65536 --n-layer 1",
                                "ulimit -v 600000; ");
  expect_one_line_error(out, "out of memory running 'mambacpp make-model'", "make-model under ulimit -v");
}

// `-f /dev/zero`, a --tokenizer or config.json that is /dev/zero read until memory ran out; a
// FIFO as -f, --tokenizer or --state-in blocked forever (`timeout` turns a regression into a
// failure instead of a hang).
TEST(CliHardening, InputsThatAreNotRegularFilesAreRefusedAtOnce) {
  const std::string dir = test::make_temp_dir("cli_inputs");
  const std::string fifo = dir + "/pipe";
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  const std::string zero_config = dir + "/zero_config";
  fs::create_directories(zero_config);
  fs::create_symlink("/dev/zero", zero_config + "/config.json");
  std::ofstream(dir + "/sparse.txt").close();
  fs::resize_file(dir + "/sparse.txt", uint64_t{50} << 30);
  const std::string m = model_of("mamba1");
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"run -m " + m + " -f /dev/zero", "prompt file '/dev/zero': it is a character device"},
      {"run -m " + m + " -f " + fifo, "prompt file '" + fifo + "': it is a FIFO (named pipe)"},
      {"tokenize -m " + m + " -f " + fifo, "it is a FIFO (named pipe)"},
      {"run -m " + m + " -f " + dir + "/sparse.txt",
       "larger than the 64 MiB limit for a prompt file (50 GiB)"},
      {"tokenize --tokenizer /dev/zero -p hi", "tokenizer file '/dev/zero': it is a character device"},
      {"tokenize --tokenizer " + fifo + " -p hi", "it is a FIFO (named pipe)"},
      {"run -m " + m + " -p hi --state-in " + fifo, "'" + fifo + "': it is a FIFO (named pipe)"},
      {"generate -m " + zero_config + " --tokens 1 -n 1", "config file '" + zero_config + "/config.json'"},
  };
  for (const auto& [arguments, fragment] : cases)
    expect_one_line_error(run_cli(arguments, "timeout 20 "), fragment, arguments);
}

// A copy of `model` whose every weight is NaN (make-model writes float32 safetensors).
std::string nan_model(const std::string& model) {
  const std::string dir = test::make_temp_dir("cli_nan") + "/model";
  fs::copy(model, dir, fs::copy_options::recursive);
  const std::string path = dir + "/model.safetensors";
  std::string bytes = read_text_file(path);
  uint64_t header = 0;
  for (int i = 7; i >= 0; --i) header = header << 8 | static_cast<uint8_t>(bytes[i]);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (size_t at = 8 + header; at + 4 <= bytes.size(); at += 4) std::memcpy(&bytes[at], &nan, 4);
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
  return dir;
}

TEST(CliHardening, MisleadingErrorsSayWhatIsWrong) {
  const std::string dir = test::make_temp_dir("cli_errors");
  const std::string m = model_of("mamba1");
  // tokenizer.json as a symlink loop or a FIFO was reported as "no tokenizer".
  const std::string loop = dir + "/loop", fifo_model = dir + "/fifo";
  for (const std::string& copy : {loop, fifo_model}) fs::copy(m, copy, fs::copy_options::recursive);
  fs::remove(loop + "/tokenizer.json");
  fs::create_symlink(loop + "/tokenizer.json", loop + "/tokenizer.json");
  fs::remove(fifo_model + "/tokenizer.json");
  ASSERT_EQ(mkfifo((fifo_model + "/tokenizer.json").c_str(), 0600), 0);
  const std::string nan = nan_model(m);
  const std::vector<std::pair<std::string, std::string>> cases = {
      // Out of range used to saturate to INT64_MAX; an empty number used to be 0.
      {"generate -m " + m + " --tokens 1 --seed 99999999999999999999",
       "'99999999999999999999' is out of range"},
      {"generate -m " + m + " --tokens 1 --seed 1e20", "--seed"},
      {"generate -m " + m + " --tokens 1 -n ''", "--n-predict: an empty value is not a number"},
      {"run -m " + m + " -p hi --temp ''", "--temp: an empty value is not a number"},
      {"bench -m " + m + " --prompt-len ''", "--prompt-len: an empty value is not a number"},
      // An output folder that does not exist failed only after the whole generation.
      {"generate -m " + m + " --tokens 1 -n 100000 --ignore-eos --state-out " + dir + "/nope/x",
       "cannot write --state-out '" + dir + "/nope/x': folder '" + dir + "/nope': No such file or directory"},
      {"logits -m " + m + " --tokens 1 --out " + dir + "/nope/l.npy", "cannot write --out"},
      {"run -m " + loop + " -p hi", "'" + loop + "/tokenizer.json': too many levels of symbolic links"},
      {"tokenize -m " + fifo_model + " -p hi", "'" + fifo_model + "/tokenizer.json': it is a FIFO"},
      {"generate -m " + fifo_model + " --tokens 1", "it is a FIFO"},
      // All-NaN weights gave 0 tokens reported as "stop: eos".
      {"run -m " + nan + " -p hi -n 4", "the model's logits are not finite"},
      {"generate -m " + nan + " --tokens 1,2 -n 4", "the model's logits are not finite"},
      // `run -f DIR` said "give a prompt with -p".
      {"run -m " + m + " -f " + dir, "prompt file '" + dir + "': it is a directory"},
  };
  for (const auto& [arguments, fragment] : cases)
    expect_one_line_error(run_cli(arguments, "timeout 20 "), fragment, arguments);
}

// `make-model --out X --seed 1` then `--seed 2 --shards 3` printed "wrote X" but X still loaded
// the seed-1 weights: the old model.safetensors won over the new index. A new checkpoint now
// replaces the old one's weight files, and a folder holding both forms is refused as ambiguous.
TEST(CliHardening, MakeModelReplacesThePreviousCheckpointsWeightFiles) {
  const std::string dir = test::make_temp_dir("cli_remake");
  const std::string shape = " --d-model 32 --n-layer 2 --vocab 64 ";
  const auto logits_of = [&](const std::string& model, const std::string& name) {
    const CliOutput out = run_cli("logits -m " + model + " --tokens 1,2,3 --out " + dir + "/" + name);
    EXPECT_EQ(out.status, 0) << out.err;
    std::vector<int64_t> read_shape;
    return read_npy_f32(dir + "/" + name, read_shape);
  };
  ASSERT_EQ(run_cli("make-model --out " + dir + "/fresh" + shape + "--seed 2").status, 0);
  const std::vector<float> seed2 = logits_of(dir + "/fresh", "fresh.npy");
  const std::string x = dir + "/x";
  ASSERT_EQ(run_cli("make-model --out " + x + shape + "--seed 1").status, 0);
  ASSERT_EQ(run_cli("make-model --out " + x + shape + "--seed 2 --shards 3").status, 0);
  EXPECT_FALSE(fs::exists(x + "/model.safetensors"));
  EXPECT_TRUE(test::same_bits(logits_of(x, "sharded.npy"), seed2));
  // Back to one file: the three shards and their index go.
  ASSERT_EQ(run_cli("make-model --out " + x + shape + "--seed 2").status, 0);
  for (const auto& entry : fs::directory_iterator(x))
    EXPECT_EQ(entry.path().filename().string().find("-of-"), std::string::npos) << entry.path();
  EXPECT_FALSE(fs::exists(x + "/model.safetensors.index.json"));
  EXPECT_TRUE(test::same_bits(logits_of(x, "single.npy"), seed2));
  // A single file beside an index (as the bug left them) is refused, naming both.
  ASSERT_EQ(run_cli("make-model --out " + dir + "/both" + shape + "--seed 2 --shards 2").status, 0);
  fs::copy_file(x + "/model.safetensors", dir + "/both/model.safetensors");
  expect_one_line_error(run_cli("logits -m " + dir + "/both --tokens 1 --out " + dir + "/l.npy"),
                        "holds both model.safetensors and model.safetensors.index.json", "both forms");
}

}  // namespace
}  // namespace mb

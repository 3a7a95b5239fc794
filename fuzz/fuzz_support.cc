#include "fuzz_support.h"

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "model/make_model.h"

namespace mb::fuzz {

namespace {

std::string make_scratch_dir() {
  const std::filesystem::path shm("/dev/shm");
  const std::string base =
      std::filesystem::is_directory(shm) ? shm.string() : std::filesystem::temp_directory_path().string();
  std::string pattern = base + "/mambacpp-fuzz-XXXXXX";
  if (mkdtemp(pattern.data()) == nullptr) {
    std::perror("mkdtemp");
    std::abort();
  }
  return pattern;
}

}  // namespace

const std::string& scratch_dir() {
  // Never destroyed, so the exit handler that removes the folder can still read its name.
  static const std::string* const dir = [] {
    const auto* made = new std::string(make_scratch_dir());
    std::atexit([] { std::filesystem::remove_all(scratch_dir()); });
    return made;
  }();
  return *dir;
}

std::string write_scratch_file(const std::string& name, std::span<const uint8_t> bytes) {
  const std::string path = scratch_dir() + "/" + name;
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  out.close();
  if (!out) {
    std::fprintf(stderr, "cannot write %s\n", path.c_str());
    std::abort();
  }
  return path;
}

// Written by touch() so that the compiler cannot drop its reads.
volatile uint8_t touched_sum;

void touch(std::span<const uint8_t> bytes) {
  uint8_t sum = 0;
  for (uint8_t byte : bytes) sum = static_cast<uint8_t>(sum + byte);
  touched_sum = sum;
}

void abort_on_internal_check(const char* message) {
  std::fprintf(stderr, "mb::Error from an internal check (a bug reachable from input): %s\n", message);
  std::abort();
}

ModelConfig tiny_model_config() {
  ModelConfig c;
  c.arch = Architecture::Mamba1;
  c.d_model = 16;
  c.n_layer = 1;
  c.vocab_size = 260;
  c.vocab_rows = 264;
  c.pad_vocab_size_multiple = 8;
  c.d_state = 4;
  c.d_conv = 4;
  c.expand = 2;
  c.d_inner = 32;
  c.dt_rank = 1;
  return c;
}

void write_tiny_model(const std::string& dir) {
  MakeModelOptions options;
  options.config = tiny_model_config();
  options.write_tokenizer = false;
  make_model(dir, options);
}

}  // namespace mb::fuzz

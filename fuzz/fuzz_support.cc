// SPDX-License-Identifier: MIT
#include "fuzz_support.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "io/torch_checkpoint.h"
#include "io/torch_pickle.h"
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

namespace {

void expect_same_tensors(const TensorSet& original, const TensorSet& copy, const char* how) {
  const auto& a = original.tensors();
  const auto& b = copy.tensors();
  bool same = a.size() == b.size();
  for (auto it = a.begin(), jt = b.begin(); same && it != a.end(); ++it, ++jt) {
    const StoredTensor& x = it->second;
    const StoredTensor& y = jt->second;
    same = x.name == y.name && x.dtype_string == y.dtype_string && x.shape == y.shape &&
           x.byte_size == y.byte_size && (x.byte_size == 0 || std::memcmp(x.data, y.data, x.byte_size) == 0);
  }
  if (!same) {
    std::fprintf(stderr, "the tensors changed in a round trip through %s\n", how);
    std::abort();
  }
}

}  // namespace

void expect_round_trip(const TensorSet& set, bool torch_too) {
  try {
    SafetensorsWriter writer;
    for (const auto& [name, tensor] : set.tensors())
      writer.add_raw(name, tensor.dtype_string, tensor.shape,
                     std::vector<uint8_t>(tensor.data, tensor.data + tensor.byte_size));
    for (const auto& [key, value] : set.metadata()) writer.set_metadata(key, value);
    const std::string path = scratch_dir() + "/round_trip.safetensors";
    writer.write(path);
    expect_same_tensors(set, TensorSet::open_file(path), "SafetensorsWriter");
    if (set.metadata() != TensorSet::open_file(path).metadata()) {
      std::fprintf(stderr, "the metadata changed in a round trip through SafetensorsWriter\n");
      std::abort();
    }
    if (!torch_too) return;
    std::vector<StoredTensor> tensors;
    for (const auto& [name, tensor] : set.tensors()) {
      if (storage_type_for_dtype(tensor.dtype_string) == nullptr) return;
      tensors.push_back(tensor);
    }
    const std::string bin = scratch_dir() + "/round_trip.bin";
    write_torch_checkpoint(bin, tensors);
    expect_same_tensors(set, TensorSet::open_file(bin), "write_torch_checkpoint");
  } catch (const Error& e) {
    std::fprintf(stderr, "writing back tensors that were read failed: %s\n", e.what());
    std::abort();
  }
}

ModelConfig tiny_model_config() {
  ModelConfig c;
  c.arch = Architecture::Mamba1;
  c.d_model = 16;
  c.n_layer = 1;
  c.vocab_size = 260;
  c.vocab_rows = 264;
  c.pad_vocab_size_multiple = 8;
  c.ssm.d_state = 4;
  c.ssm.d_conv = 4;
  c.ssm.expand = 2;
  c.ssm.d_inner = 32;
  c.ssm.dt_rank = 1;
  return c;
}

void write_tiny_model(const std::string& dir) {
  MakeModelOptions options;
  options.config = tiny_model_config();
  options.write_tokenizer = false;
  make_model(dir, options);
}

}  // namespace mb::fuzz

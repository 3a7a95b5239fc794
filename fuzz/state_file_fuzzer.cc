// SPDX-License-Identifier: MIT
// Fuzzes state files (engine/state_file.h) against a fixed tiny model. An input whose first
// byte is odd has its last 8 bytes replaced by the correct checksum of the rest, so the
// fuzzer also reaches the checks behind the checksum; even ones are taken as they are.
#include <cstring>
#include <memory>
#include <vector>

#include "engine/state_file.h"
#include "fuzz_support.h"
#include "io/binary_codec.h"
#include "model/model.h"

namespace {

const mb::Model* model = nullptr;

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  const std::string dir = mb::fuzz::scratch_dir() + "/model";
  mb::fuzz::write_tiny_model(dir);
  static const std::unique_ptr<mb::Model> loaded = mb::Model::load(dir);
  model = loaded.get();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  std::vector<uint8_t> file(data + 1, data + size);
  if ((data[0] & 1) && file.size() >= 8) {
    const uint64_t sum = mb::binary::fnv1a64(file.data(), file.size() - 8);
    std::memcpy(file.data() + file.size() - 8, &sum, 8);
  }
  const std::string path = mb::fuzz::write_scratch_file("state.mbstate", file);
  mb::fuzz::expect_clean_refusal([&] {
    const mb::SequenceState state = mb::load_state(path, *model);
    if (state.floats() != model->state_floats() || state.position < 0) {
      std::fprintf(stderr, "load_state accepted a state of %zu values at position %lld\n", state.floats(),
                   static_cast<long long>(state.position));
      std::abort();
    }
  });
  return 0;
}

// SPDX-License-Identifier: MIT
// Fuzzes slot files (engine/slot_file.h: a token list plus an embedded state file) against a
// fixed tiny model. An input whose first byte is odd has both checksums repaired (the embedded
// state's, when its extent can be read, then the file's), so the fuzzer also reaches the checks
// behind them; even ones are taken as they are.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

#include "engine/slot_file.h"
#include "fuzz_support.h"
#include "io/binary_codec.h"
#include "model/model.h"

namespace {

const mb::Model* model = nullptr;

// Both checksums are FNV-1a over everything before them.
void repair_checksum(std::vector<uint8_t>& bytes, size_t begin, size_t end) {
  const uint64_t sum = mb::binary::fnv1a64(bytes.data() + begin, end - 8 - begin);
  std::memcpy(bytes.data() + end - 8, &sum, 8);
}

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
  if ((data[0] & 1) && file.size() >= 36) {
    // "MBSLOT01" | u32 version | u64 count | i32 tokens[count] | u64 state bytes | state | u64 sum
    uint64_t count = 0, state_size = 0;
    std::memcpy(&count, file.data() + 12, 8);
    if (count <= (file.size() - 36) / 4) {
      const size_t state_at = 20 + count * 4 + 8;
      std::memcpy(&state_size, file.data() + state_at - 8, 8);
      if (state_size >= 8 && state_size <= file.size() - 8 - state_at)
        repair_checksum(file, state_at, state_at + state_size);
    }
    repair_checksum(file, 0, file.size());
  }
  const std::string path = mb::fuzz::write_scratch_file("prefix.slot", file);
  mb::fuzz::expect_clean_refusal([&] {
    const mb::SlotFile slot = mb::load_slot_file(path, *model);
    bool tokens_ok = !slot.tokens.empty();
    for (int32_t token : slot.tokens)
      tokens_ok = tokens_ok && token >= 0 && token < model->config().vocab_size;
    if (!tokens_ok || slot.state.floats() != model->state_floats() ||
        slot.state.position != static_cast<int64_t>(slot.tokens.size())) {
      std::fprintf(stderr, "load_slot_file accepted %zu tokens with a state of %zu values at position %lld\n",
                   slot.tokens.size(), slot.state.floats(), static_cast<long long>(slot.state.position));
      std::abort();
    }
  });
  return 0;
}

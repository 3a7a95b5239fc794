// SPDX-License-Identifier: MIT
// Fuzzes a single safetensors file: the 8-byte header length, the JSON header (duplicate names,
// dtypes, shapes, data_offsets, overlaps) and the data section. A file that opens must describe
// only bytes inside the mapping, which touching every tensor's range checks under ASan.
#include "fuzz_support.h"
#include "io/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = mb::fuzz::write_scratch_file("model.safetensors", {data, size});
  mb::fuzz::expect_clean_refusal([&] {
    const mb::TensorSet set = mb::TensorSet::open_file(path);
    for (const auto& [name, tensor] : set.tensors()) mb::fuzz::touch({tensor.data, tensor.byte_size});
    mb::fuzz::expect_round_trip(set, false);
  });
  return 0;
}

// SPDX-License-Identifier: MIT
// Fuzzes a whole pytorch_model.bin as TensorSet opens it: the zip reader (local and central
// headers, ZIP64 records, CRC-32 checks), the record layout and the pickle interpreter, then
// the storage ranges the tensors point into.
#include "fuzz_support.h"
#include "io/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = mb::fuzz::write_scratch_file("pytorch_model.bin", {data, size});
  mb::fuzz::expect_clean_refusal([&] {
    const mb::TensorSet set = mb::TensorSet::open_file(path);
    for (const auto& [name, tensor] : set.tensors()) mb::fuzz::touch({tensor.data, tensor.byte_size});
    mb::fuzz::expect_round_trip(set, true);
  });
  return 0;
}

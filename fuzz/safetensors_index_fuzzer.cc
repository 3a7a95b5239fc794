// SPDX-License-Identifier: MIT
// Fuzzes model.safetensors.index.json: the JSON, the weight_map and its shard names (which must
// stay plain file names inside the folder), against three fixed shards beside it: two
// safetensors files and a torch.save .bin, holding tensors "a", "b" and "c".
#include "fuzz_support.h"
#include "io/safetensors.h"
#include "io/torch_checkpoint.h"

namespace {

void write_shards() {
  const std::string& dir = mb::fuzz::scratch_dir();
  mb::SafetensorsWriter first;
  first.add_f32("a", {2}, {1.0f, 2.0f}, mb::DType::F32);
  first.write(dir + "/model-00001-of-00003.safetensors");
  mb::SafetensorsWriter second;
  second.add_f32("b", {1, 2}, {3.0f, 4.0f}, mb::DType::BF16);
  second.write(dir + "/model-00002-of-00003.safetensors");
  mb::TorchCheckpointWriter third;
  third.add_f32("c", {3}, {5.0f, 6.0f, 7.0f}, mb::DType::F16);
  third.write(dir + "/pytorch_model-00003-of-00003.bin");
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  write_shards();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = mb::fuzz::write_scratch_file("model.safetensors.index.json", {data, size});
  mb::fuzz::expect_clean_refusal([&] {
    const mb::TensorSet set = mb::TensorSet::open_index(path);
    for (const auto& [name, tensor] : set.tensors()) mb::fuzz::touch({tensor.data, tensor.byte_size});
  });
  return 0;
}

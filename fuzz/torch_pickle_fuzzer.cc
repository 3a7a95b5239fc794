// SPDX-License-Identifier: MIT
// Fuzzes the restricted pickle interpreter directly on data.pkl bytes: a zip-wrapped pickle
// must also pass the archive's CRC-32 checks, which random mutations almost never do.
#include "fuzz_support.h"
#include "io/torch_pickle.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  mb::fuzz::expect_clean_refusal([&] {
    const mb::PickledStateDict dict = mb::unpickle_state_dict({data, size}, "'fuzz/data.pkl'");
    for (const mb::PickledTensor& tensor : dict.tensors) {
      if (tensor.storage >= dict.storages.size()) {
        std::fprintf(stderr, "tensor '%s' names storage %zu of %zu\n", tensor.name.c_str(), tensor.storage,
                     dict.storages.size());
        std::abort();
      }
    }
  });
  return 0;
}

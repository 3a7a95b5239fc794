// SPDX-License-Identifier: MIT
// Fuzzes the .npy reader: magic, header length, dtype and the shape tuple.
#include <vector>

#include "fuzz_support.h"
#include "io/npy.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = mb::fuzz::write_scratch_file("array.npy", {data, size});
  mb::fuzz::expect_clean_refusal([&] {
    std::vector<int64_t> shape;
    const std::vector<float> values = mb::read_npy_f32(path, shape);
    int64_t count = 1;
    for (int64_t extent : shape) count *= extent;
    if (count != static_cast<int64_t>(values.size())) {
      std::fprintf(stderr, "read_npy_f32 returned %zu values for a shape of %lld elements\n", values.size(),
                   static_cast<long long>(count));
      std::abort();
    }
  });
  return 0;
}

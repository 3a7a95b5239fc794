// Fuzzes config.json through load_model_config, so that the Python-infinity pre-processing,
// the bounded JSON parse and every key reader of both config forms run on the fuzzer's bytes.
#include <filesystem>

#include "fuzz_support.h"
#include "model/config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  mb::fuzz::write_scratch_file("config.json", {data, size});
  mb::fuzz::expect_clean_refusal([&] { mb::load_model_config(mb::fuzz::scratch_dir()); });
  return 0;
}

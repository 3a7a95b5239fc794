// SPDX-License-Identifier: MIT
// Fuzzes GGUF files: the header, metadata of every value type, tensor infos and the data section
// (io/gguf.cc). A file that parses must describe only bytes inside the mapping (touched under
// ASan), must survive a rewrite by GgufWriter unchanged, and is then read as a model checkpoint
// (model/gguf_checkpoint.cc) and as a tokenizer (engine/gguf_tokenizer.cc), each of which must
// either work or refuse with mb::Error.
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "engine/gguf_tokenizer.h"
#include "fuzz_support.h"
#include "io/gguf.h"
#include "model/gguf_checkpoint.h"

namespace {

// The same metadata, tensors and alignment. "general.alignment" is compared as the alignment it
// sets: the writer records it only when it is not GGUF's default, so a file that spells out the
// default (or spells it with another integer type) is rewritten without the key, and is the same.
void expect_same(const mb::GgufFile& a, const mb::GgufFile& b) {
  const auto keys = [](const mb::GgufFile& file) {
    return file.metadata().size() - (file.find("general.alignment") != nullptr ? 1 : 0);
  };
  bool same =
      a.alignment() == b.alignment() && keys(a) == keys(b) && a.tensors().size() == b.tensors().size();
  for (const auto& [key, value] : a.metadata()) {
    if (key == "general.alignment") continue;
    const mb::GgufValue* other = b.find(key);
    same = same && other != nullptr && *other == value;
  }
  for (size_t i = 0; same && i < a.tensors().size(); ++i) {
    const mb::GgufTensorInfo& x = a.tensors()[i];
    const mb::GgufTensorInfo& y = b.tensors()[i];
    same = x.name == y.name && x.ne == y.ne && x.type == y.type && x.byte_size == y.byte_size &&
           (x.byte_size == 0 || std::memcmp(x.data, y.data, x.byte_size) == 0);
  }
  if (!same) {
    std::fprintf(stderr, "GGUF round trip changed the file\n");
    std::abort();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = mb::fuzz::write_scratch_file("model.gguf", {data, size});
  mb::fuzz::expect_clean_refusal([&] {
    const mb::GgufFile file(path);
    for (const mb::GgufTensorInfo& tensor : file.tensors()) mb::fuzz::touch({tensor.data, tensor.byte_size});
    mb::fuzz::expect_clean_refusal([&] {
      mb::GgufWriter writer(file.alignment());
      for (const auto& [key, value] : file.metadata())
        if (key != "general.alignment") writer.set(key, value);
      for (const mb::GgufTensorInfo& tensor : file.tensors())
        writer.add_tensor(tensor.name, tensor.ne, tensor.type,
                          std::vector<uint8_t>(tensor.data, tensor.data + tensor.byte_size));
      const std::string again = mb::fuzz::write_scratch_file("again.gguf", writer.serialize());
      expect_same(file, mb::GgufFile(again));
    });
    mb::fuzz::expect_clean_refusal([&] {
      const mb::GgufCheckpoint checkpoint = mb::open_gguf_checkpoint(file);
      for (const auto& [name, tensor] : checkpoint.tensors->tensors())
        mb::fuzz::touch({tensor.data, tensor.byte_size});
    });
    mb::fuzz::expect_clean_refusal([&] { mb::gguf_tokenizer(file).encode("Hello, GGUF!"); });
  });
  return 0;
}

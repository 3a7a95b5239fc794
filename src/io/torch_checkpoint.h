// SPDX-License-Identifier: MIT
// PyTorch checkpoints (`pytorch_model.bin`, torch.save's zip format): reading and writing.
//
// torch.save(state_dict, f) writes a ZIP archive (see io/zip_archive.h) whose entries all sit
// under one top-level folder (`archive/`, or the file's stem for files saved to a path):
//   <prefix>/data.pkl    a pickle (protocol 2) of an OrderedDict name -> tensor
//   <prefix>/byteorder   "little" (absent in files from before PyTorch 1.10)
//   <prefix>/data/<key>  the raw bytes of one storage, 64-byte aligned in the file
//   <prefix>/version     "3\n"
// Each tensor is pickled as a call torch._utils._rebuild_tensor_v2(storage, storage_offset,
// size, stride, requires_grad, backward_hooks[, metadata]) whose storage is a persistent id
// ('storage', torch.FloatStorage, key, location, numel) naming the entry data/<key>.
//
// A pickle is a program for a stack machine that may import and call any Python function, so
// loading one with Python's pickle module runs whatever the file says. This reader never
// executes anything: it interprets a fixed subset of opcodes into plain values (strings, ints,
// tuples, lists, dicts), recognises by name only the few globals a state_dict uses
// (collections.OrderedDict, torch._utils._rebuild_tensor_v2 / _rebuild_parameter and the
// torch.*Storage types) and refuses every other global, opcode or persistent id with an
// mb::Error naming the file. The interpreter is a loop over the bytes with bounded stack, memo
// and value counts, so no input can recurse, loop or allocate without limit. The tensors it
// finds point into the caller's mapping after their storage ranges have been checked.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "io/mapped_file.h"
#include "io/safetensors.h"

namespace mb {

// True when `bytes` start like a zip archive (a local file header), as .bin checkpoints do.
bool looks_like_zip(std::span<const uint8_t> bytes);

// The tensors of the torch.save file mapped in `file`, in the state_dict's order. They point
// into `file`, which must outlive them. Tensors whose storage type the engine does not compute
// with (LongStorage, ...) are listed with an empty `dtype`, like the safetensors reader does.
std::vector<StoredTensor> read_torch_checkpoint(const MappedFile& file);

// Builds a torch.save(state_dict) file in memory and writes it atomically: an OrderedDict of
// _rebuild_tensor_v2 tensors pickled with protocol 2, the storages as 64-byte aligned stored
// zip entries with their CRC-32, then `byteorder` "little" and `version` "3\n". The
// archive's folder is the file's stem, as torch.save names it for a path.
class TorchCheckpointWriter {
 public:
  // Adds a storage of `dtype` (a safetensors dtype string: "F32", "BF16", "F16", "I64", ...)
  // holding `bytes`, and returns its index for add_view.
  size_t add_storage(const std::string& dtype, std::vector<uint8_t> bytes);
  // Adds tensor `name`: a contiguous view of `shape` starting `offset` elements into storage
  // `storage`. Several tensors may share one storage (tied weights).
  void add_view(const std::string& name, size_t storage, int64_t offset, std::vector<int64_t> shape);
  // Adds tensor `name` with a storage of its own.
  void add(const std::string& name, const std::string& dtype, std::vector<int64_t> shape,
           std::vector<uint8_t> bytes);
  void add_f32(const std::string& name, std::vector<int64_t> shape, const std::vector<float>& values,
               DType store_as);

  std::vector<uint8_t> serialize(const std::string& archive_name) const;
  void write(const std::string& path) const;

 private:
  struct Storage {
    std::string dtype;
    std::vector<uint8_t> bytes;
  };
  struct View {
    std::string name;
    size_t storage;
    int64_t offset;
    std::vector<int64_t> shape;
  };
  std::vector<Storage> storages_;
  std::vector<View> views_;
};

// Writes `tensors` (e.g. those of a TensorSet) as a torch.save file, each with its own storage.
void write_torch_checkpoint(const std::string& path, const std::vector<StoredTensor>& tensors);

}  // namespace mb

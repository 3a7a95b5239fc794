// SPDX-License-Identifier: MIT
// The pickle side of PyTorch checkpoints (see io/torch_checkpoint.h): a restricted, iterative
// interpreter that turns the data.pkl of a state_dict into plain records without executing
// anything, and the matching writer that emits the opcodes torch.save emits (protocol 2).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "core/dtype.h"

namespace mb {

// A torch.*Storage class: the only classes a checkpoint may name besides the rebuild helpers.
struct StorageType {
  const char* torch_name;  // "FloatStorage"
  const char* dtype;       // safetensors spelling, "F32"
  size_t element_size;
  std::optional<DType> compute_dtype;  // set for the dtypes the engine computes with
};
std::span<const StorageType> storage_types();
const StorageType* storage_type_for_dtype(const std::string& dtype);  // nullptr when unknown

// `text` with bytes outside printable ASCII replaced by '?' and cut to 120 characters, for
// quoting names from untrusted files in error messages.
std::string printable(const std::string& text);

struct PickledStorage {
  size_t type = 0;  // index into storage_types()
  std::string key;  // names the record data/<key>
  std::string location;
  int64_t numel = 0;
};

struct PickledTensor {
  std::string name;
  size_t storage = 0;  // index into PickledStateDict::storages
  int64_t offset = 0;  // in elements
  std::vector<int64_t> sizes;
  std::vector<int64_t> strides;
};

struct PickledStateDict {
  std::vector<PickledStorage> storages;  // one per persistent id, in order of appearance
  std::vector<PickledTensor> tensors;    // in the dict's order
};

// Interprets `pickle`, which must evaluate to a dict (usually an OrderedDict) of tensors.
// `where` prefixes error messages ("'path': data.pkl"). Refuses, with an mb::Error, any opcode,
// global or persistent id outside what torch.save writes for a state_dict.
PickledStateDict unpickle_state_dict(std::span<const uint8_t> pickle, const std::string& where);

struct PickleTensorRecord {
  std::string name;
  const StorageType* type = nullptr;
  std::string key;
  int64_t storage_numel = 0;
  int64_t offset = 0;
  std::vector<int64_t> shape;  // contiguous row-major
};

// The data.pkl torch.save writes for an OrderedDict of these tensors (without `_metadata`).
std::vector<uint8_t> pickle_state_dict(const std::vector<PickleTensorRecord>& tensors);

}  // namespace mb

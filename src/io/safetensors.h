// SPDX-License-Identifier: MIT
// Safetensors reading (single file and sharded) and writing.
//
// Every structural property of a file is validated before any tensor byte is touched: header
// length within the file, well-formed JSON without duplicate names, known dtypes, offsets
// inside the data section and not overlapping, and dtype x shape matching the byte length.
// A malformed file is refused with an mb::Error naming the file and the defect.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "io/mapped_file.h"

namespace mb {

// One tensor as stored in a checkpoint. `dtype` is set only for the float dtypes the engine
// computes with; other dtypes (integers, f64, f8) are listed but cannot be bound as weights.
struct StoredTensor {
  std::string name;
  std::string dtype_string;    // as written in the header, e.g. "BF16"
  std::optional<DType> dtype;  // F32, BF16 or F16; empty for dtypes the engine does not compute with
  std::vector<int64_t> shape;
  const uint8_t* data = nullptr;  // points into the mapping
  size_t byte_size = 0;
  std::string file;

  int64_t element_count() const;
  std::string shape_string() const;  // "[3072, 768]"
};

// All tensors of a checkpoint, across shards and of either format, by name. Owns the mappings.
class TensorSet {
 public:
  // Opens the first of `model.safetensors`, `model.safetensors.index.json`,
  // `pytorch_model.bin` and `pytorch_model.bin.index.json` that exists in `dir`.
  static TensorSet open_dir(const std::string& dir);
  // A safetensors file, or a torch.save zip archive (io/torch_checkpoint.h), told by content.
  static TensorSet open_file(const std::string& path);
  // An index whose weight_map names the shard of every tensor (of either format).
  static TensorSet open_index(const std::string& index_path);
  // Tensors another reader (GGUF) found in `file`, which the set keeps alive; names are unique.
  static TensorSet from_tensors(std::shared_ptr<const MappedFile> file, std::vector<StoredTensor> tensors);

  const StoredTensor* find(const std::string& name) const;
  // Drops a tensor's pages from resident memory once it has been copied (MappedFile::release);
  // it stays readable. Tensors outside the set's mappings are left alone.
  void release_pages(const StoredTensor& tensor) const;
  const std::map<std::string, StoredTensor>& tensors() const { return tensors_; }
  const std::map<std::string, std::string>& metadata() const { return metadata_; }

 private:
  void add_file(const std::string& path);

  std::vector<std::shared_ptr<const MappedFile>> files_;
  std::map<std::string, StoredTensor> tensors_;
  std::map<std::string, std::string> metadata_;
};

// Builds a safetensors file in memory and writes it atomically.
class SafetensorsWriter {
 public:
  void add(const std::string& name, DType dtype, std::vector<int64_t> shape, std::vector<uint8_t> bytes);
  // Any safetensors dtype string ("I32", "F64", ...), for files carrying non-weight tensors.
  void add_raw(const std::string& name, const std::string& dtype, std::vector<int64_t> shape,
               std::vector<uint8_t> bytes);
  void add_f32(const std::string& name, std::vector<int64_t> shape, const std::vector<float>& values,
               DType store_as);
  void set_metadata(const std::string& key, const std::string& value) { metadata_[key] = value; }
  size_t byte_size() const;
  void write(const std::string& path) const;

 private:
  struct Entry {
    std::string name;
    std::string dtype;
    std::vector<int64_t> shape;
    std::vector<uint8_t> bytes;
  };
  std::vector<Entry> entries_;
  std::map<std::string, std::string> metadata_;
};

// Returns `values` encoded in `dtype` (round to nearest even for bf16/f16).
std::vector<uint8_t> encode_f32(const std::vector<float>& values, DType dtype);

}  // namespace mb

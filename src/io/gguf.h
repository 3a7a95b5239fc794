// SPDX-License-Identifier: MIT
// GGUF files (llama.cpp's checkpoint format), versions 2 and 3: reading and writing.
//
// Layout (all little-endian):
//   "GGUF" | u32 version | u64 tensor_count | u64 metadata_count
//   metadata_count x (string key | u32 value_type | value)
//   tensor_count x (string name | u32 n_dims | n_dims x u64 ne | u32 ggml_type | u64 offset)
//   padding to general.alignment (default 32) | data section
// A string is a u64 byte length and the bytes; an array is a u32 element type, a u64 count and
// the elements. Tensor dims are in GGML order: ne[0] is the fastest-varying (a PyTorch tensor of
// shape [rows, cols] is ne = {cols, rows}). Offsets are relative to the data section and
// multiples of the alignment.
//
// The reader validates everything before any tensor byte is used: every count, length and
// offset against the bytes that remain (nothing is allocated from an unchecked count), known
// value and ggml types, no duplicate keys or tensor names, aligned non-overlapping tensors
// inside the data section whose byte sizes follow from their types' block sizes. A malformed
// file is refused with an mb::Error naming the file and the defect.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "io/mapped_file.h"

namespace mb {

enum class GgufType : uint32_t {
  Uint8 = 0,
  Int8 = 1,
  Uint16 = 2,
  Int16 = 3,
  Uint32 = 4,
  Int32 = 5,
  Float32 = 6,
  Bool = 7,
  String = 8,
  Array = 9,
  Uint64 = 10,
  Int64 = 11,
  Float64 = 12,
};

std::string_view gguf_type_name(GgufType type);  // "u32", "string", ...

// One metadata value: a scalar, or an array of scalars (GGUF allows arrays of arrays, which no
// model file uses; they are refused). Scalars are held as arrays of one element.
struct GgufValue {
  GgufType type = GgufType::Uint32;          // Array for arrays
  GgufType element_type = GgufType::Uint32;  // the scalar type (of the elements, for arrays)
  std::vector<int64_t> integers;             // integer and bool values (u64 as its bit pattern)
  std::vector<double> floats;                // f32 and f64 values (an f32 is exact in a double)
  std::vector<std::string> strings;          // string values

  static GgufValue u32(uint32_t value);
  static GgufValue i32(int32_t value);
  static GgufValue u64(uint64_t value);
  static GgufValue f32(float value);
  static GgufValue boolean(bool value);
  static GgufValue string(std::string value);
  static GgufValue string_array(std::vector<std::string> values);
  // An array of integers of `element_type` (any integer type or Bool).
  static GgufValue integer_array(GgufType element_type, std::vector<int64_t> values);
  static GgufValue float_array(GgufType element_type, std::vector<double> values);

  bool is_array() const { return type == GgufType::Array; }
  size_t size() const;  // element count (1 for a scalar)
  bool operator==(const GgufValue&) const = default;
};

// GGML tensor types with their block sizes, as ggml.h numbers them.
struct GgmlTypeInfo {
  uint32_t id;
  const char* name;       // "F32", "Q4_K", ...
  int64_t block_weights;  // weights per block (1 for plain types)
  size_t block_bytes;
};
// The type with this id, or null for ids ggml does not define (or no longer supports).
const GgmlTypeInfo* ggml_type_info(uint32_t id);

inline constexpr uint32_t kGgmlF32 = 0, kGgmlF16 = 1, kGgmlQ4_0 = 2, kGgmlQ8_0 = 8, kGgmlQ4_K = 12,
                          kGgmlQ6_K = 14, kGgmlBF16 = 30;
inline constexpr uint32_t kGgufDefaultAlignment = 32;
// ggml's GGML_MAX_DIMS and GGML_MAX_NAME: longer names and more dims are refused, as llama.cpp does.
inline constexpr size_t kGgufMaxDims = 4;
inline constexpr size_t kGgufMaxNameBytes = 63;

struct GgufTensorInfo {
  std::string name;
  std::vector<int64_t> ne;  // GGML order, ne[0] fastest
  uint32_t type = kGgmlF32;
  uint64_t offset = 0;  // from the start of the data section
  size_t byte_size = 0;
  const uint8_t* data = nullptr;  // into the mapping

  int64_t element_count() const;
  std::string dims_string() const;  // "{64, 128}" (GGML order)
};

// Bytes that `ne` of ggml type `type` occupy; throws mb::Error (prefixed with `where`) for an
// unknown type, a row length that is not a multiple of the block, or an implausible size.
size_t ggml_tensor_bytes(uint32_t type, std::span<const int64_t> ne, const std::string& where);

class GgufFile {
 public:
  explicit GgufFile(const std::string& path);  // maps and validates; throws mb::Error
  // Parses bytes that `owner` keeps alive (the mapping of `path`).
  GgufFile(std::shared_ptr<const MappedFile> owner, const std::string& path);

  const std::string& path() const { return path_; }
  uint32_t version() const { return version_; }
  uint32_t alignment() const { return alignment_; }
  const std::vector<std::pair<std::string, GgufValue>>& metadata() const { return metadata_; }
  const std::vector<GgufTensorInfo>& tensors() const { return tensors_; }
  const GgufValue* find(std::string_view key) const;
  const GgufTensorInfo* find_tensor(std::string_view name) const;
  const std::shared_ptr<const MappedFile>& mapping() const { return file_; }

  // Typed access with messages naming the file and the key. Integers accept any integer type
  // whose value fits; `unsigned_or` and friends return `fallback` when the key is absent.
  uint64_t unsigned_value(std::string_view key) const;
  std::optional<uint64_t> unsigned_if_present(std::string_view key) const;
  double float_value(std::string_view key) const;  // f32 or f64
  std::optional<bool> bool_if_present(std::string_view key) const;
  std::string string_value(std::string_view key) const;
  std::optional<std::string> string_if_present(std::string_view key) const;

 private:
  void parse(std::span<const uint8_t> bytes);

  std::shared_ptr<const MappedFile> file_;
  std::string path_;
  uint32_t version_ = 0;
  uint32_t alignment_ = kGgufDefaultAlignment;
  std::vector<std::pair<std::string, GgufValue>> metadata_;
  std::vector<GgufTensorInfo> tensors_;
};

// True when `bytes` start with the GGUF magic.
bool looks_like_gguf(std::span<const uint8_t> bytes);

// Builds a GGUF v3 file in memory and writes it atomically: the metadata in the order set,
// general.alignment when it is not the default, the tensors in the order added, each at the
// next aligned offset, with zero padding, as gguf-py's GGUFWriter lays them out.
class GgufWriter {
 public:
  explicit GgufWriter(uint32_t alignment = kGgufDefaultAlignment);

  // Sets `key` (replacing an earlier value in place). Throws mb::Error for an empty key or a
  // value whose vectors do not match its types.
  void set(const std::string& key, GgufValue value);
  // Adds a tensor whose `bytes` must be exactly ggml_tensor_bytes(type, ne); names are unique
  // and at most kGgufMaxNameBytes long.
  void add_tensor(const std::string& name, std::vector<int64_t> ne, uint32_t type,
                  std::vector<uint8_t> bytes);

  std::vector<uint8_t> serialize() const;
  void write(const std::string& path) const;

 private:
  struct Tensor {
    std::string name;
    std::vector<int64_t> ne;
    uint32_t type;
    std::vector<uint8_t> bytes;
  };
  uint32_t alignment_;
  std::vector<std::pair<std::string, GgufValue>> metadata_;
  std::vector<Tensor> tensors_;
};

}  // namespace mb

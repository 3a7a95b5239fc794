// SPDX-License-Identifier: MIT
#include "io/safetensors.h"

#include <algorithm>
#include <filesystem>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>

#include "core/error.h"
#include "core/json_text.h"
#include "io/file_io.h"
#include "io/torch_checkpoint.h"

namespace mb {
namespace {

using nlohmann::json;

// Element sizes of every dtype the safetensors format defines, so that files carrying tensors
// the engine never reads can still be validated and opened.
std::optional<size_t> safetensors_dtype_size(const std::string& dtype) {
  static const std::map<std::string, size_t> sizes = {
      {"F64", 8}, {"F32", 4}, {"F16", 2}, {"BF16", 2}, {"I64", 8},  {"I32", 4},     {"I16", 2},    {"I8", 1},
      {"U64", 8}, {"U32", 4}, {"U16", 2}, {"U8", 1},   {"BOOL", 1}, {"F8_E4M3", 1}, {"F8_E5M2", 1}};
  auto it = sizes.find(dtype);
  if (it == sizes.end()) return std::nullopt;
  return it->second;
}

std::optional<DType> compute_dtype(const std::string& dtype) {
  if (dtype == "F32") return DType::F32;
  if (dtype == "BF16") return DType::BF16;
  if (dtype == "F16") return DType::F16;
  return std::nullopt;
}

const char* header_dtype(DType dtype) {
  switch (dtype) {
    case DType::F32:
      return "F32";
    case DType::BF16:
      return "BF16";
    case DType::F16:
      return "F16";
    case DType::Q8_0:
    case DType::Q4_0:
    case DType::Q4_K:
    case DType::Q6_K:
      // safetensors has no block-quantized dtypes; quantized weights live in GGUF files.
      throw Error("safetensors cannot store " + std::string(dtype_name(dtype)) + " tensors");
  }
  return "?";
}

// Parses the header JSON while rejecting duplicate tensor names, which nlohmann would
// otherwise silently resolve to the last occurrence.
json parse_header(const std::string& text, const std::string& path) {
  std::set<std::string> seen;
  std::string duplicate;
  auto on_key = [&](int depth, const std::string& key) {
    if (depth == 1 && !seen.insert(key).second && duplicate.empty()) duplicate = key;
  };
  // A header nests three levels (tensor, entry, shape); 64 is far beyond any real one.
  const json header = parse_json_text(text, "'" + path + "': safetensors header", 64, on_key);
  if (!duplicate.empty())
    throw Error("'" + path + "': tensor '" + duplicate + "' appears twice in the header");
  if (!header.is_object()) throw Error("'" + path + "': safetensors header is not a JSON object");
  return header;
}

}  // namespace

int64_t StoredTensor::element_count() const {
  int64_t count = 1;
  for (int64_t dim : shape) count *= dim;
  return count;
}

std::string StoredTensor::shape_string() const {
  std::string text = "[";
  for (size_t i = 0; i < shape.size(); ++i) text += (i ? ", " : "") + std::to_string(shape[i]);
  return text + "]";
}

void TensorSet::add_file(const std::string& path) {
  auto file = std::make_shared<MappedFile>(path);
  const auto bytes = file->bytes();
  // torch.save files are zip archives; safetensors files start with their header length.
  if (looks_like_zip(bytes)) {
    for (StoredTensor& tensor : read_torch_checkpoint(*file)) {
      if (tensors_.count(tensor.name))
        throw Error("tensor '" + tensor.name + "' is stored twice: in '" + tensors_[tensor.name].file +
                    "' and in '" + path + "'");
      tensors_.emplace(tensor.name, std::move(tensor));
    }
    files_.push_back(std::move(file));
    return;
  }
  if (bytes.size() < 8) throw Error("'" + path + "': file too short for a safetensors header");
  uint64_t header_length = 0;
  for (int i = 7; i >= 0; --i) header_length = (header_length << 8) | bytes[i];
  if (header_length > bytes.size() - 8) {
    throw Error("'" + path + "': header length " + std::to_string(header_length) +
                " runs past the end of the " + std::to_string(bytes.size()) + "-byte file");
  }
  const json header =
      parse_header(std::string(reinterpret_cast<const char*>(bytes.data() + 8), header_length), path);
  const uint8_t* data_begin = bytes.data() + 8 + header_length;
  const uint64_t data_size = bytes.size() - 8 - header_length;

  struct Span {
    uint64_t begin, end;
    std::string name;
  };
  std::vector<Span> spans;
  for (const auto& [name, entry] : header.items()) {
    if (name == "__metadata__") {
      if (!entry.is_object()) throw Error("'" + path + "': __metadata__ is not an object");
      for (const auto& [key, value] : entry.items()) {
        if (!value.is_string()) throw Error("'" + path + "': metadata value '" + key + "' is not a string");
        metadata_[key] = value.get<std::string>();
      }
      continue;
    }
    const std::string where = "'" + path + "': tensor '" + name + "'";
    if (!entry.is_object()) throw Error(where + " is not described by an object");
    if (!entry.contains("dtype") || !entry["dtype"].is_string()) throw Error(where + " has no dtype string");
    if (!entry.contains("shape") || !entry["shape"].is_array()) throw Error(where + " has no shape array");
    if (!entry.contains("data_offsets") || !entry["data_offsets"].is_array() ||
        entry["data_offsets"].size() != 2)
      throw Error(where + " has no [begin, end] data_offsets");

    StoredTensor tensor;
    tensor.name = name;
    tensor.file = path;
    tensor.dtype_string = entry["dtype"].get<std::string>();
    const auto element_size = safetensors_dtype_size(tensor.dtype_string);
    if (!element_size) throw Error(where + " has unknown dtype '" + tensor.dtype_string + "'");
    tensor.dtype = compute_dtype(tensor.dtype_string);

    uint64_t elements = 1;
    for (const auto& dim : entry["shape"]) {
      if (!dim.is_number_unsigned())
        throw Error(where + " has a shape entry that is not a non-negative integer");
      const uint64_t extent = dim.get<uint64_t>();
      if (extent > (uint64_t{1} << 40) || (extent != 0 && elements > (uint64_t{1} << 48) / extent))
        throw Error(where + " has an implausibly large shape");
      elements *= extent;
      tensor.shape.push_back(static_cast<int64_t>(extent));
    }
    const auto& offsets = entry["data_offsets"];
    if (!offsets[0].is_number_unsigned() || !offsets[1].is_number_unsigned())
      throw Error(where + " has data_offsets that are not non-negative integers");
    const uint64_t begin = offsets[0].get<uint64_t>();
    const uint64_t end = offsets[1].get<uint64_t>();
    if (begin > end) throw Error(where + " has data_offsets with begin > end");
    if (end > data_size) {
      throw Error(where + " has data_offsets [" + std::to_string(begin) + ", " + std::to_string(end) +
                  "] past the end of the " + std::to_string(data_size) + "-byte data section");
    }
    if (end - begin != elements * *element_size) {
      throw Error(where + ": dtype " + tensor.dtype_string + " x shape " + tensor.shape_string() + " needs " +
                  std::to_string(elements * *element_size) + " bytes but data_offsets span " +
                  std::to_string(end - begin));
    }
    tensor.data = data_begin + begin;
    tensor.byte_size = end - begin;
    if (tensors_.count(name)) {
      throw Error("tensor '" + name + "' is stored twice: in '" + tensors_[name].file + "' and in '" + path +
                  "'");
    }
    // An empty tensor occupies no bytes, so it cannot overlap anything; leaving it out keeps
    // the sorted check below from pairing it with a tensor that starts at the same offset.
    if (begin != end) spans.push_back({begin, end, name});
    tensors_.emplace(name, std::move(tensor));
  }

  std::sort(spans.begin(), spans.end(), [](const Span& a, const Span& b) { return a.begin < b.begin; });
  for (size_t i = 1; i < spans.size(); ++i) {
    if (spans[i].begin < spans[i - 1].end) {
      throw Error("'" + path + "': tensors '" + spans[i - 1].name + "' and '" + spans[i].name +
                  "' have overlapping data_offsets");
    }
  }
  files_.push_back(std::move(file));
}

TensorSet TensorSet::open_file(const std::string& path) {
  TensorSet set;
  set.add_file(path);
  return set;
}

TensorSet TensorSet::from_tensors(std::shared_ptr<const MappedFile> file, std::vector<StoredTensor> tensors) {
  TensorSet set;
  for (StoredTensor& tensor : tensors) {
    if (set.tensors_.count(tensor.name))
      throw Error("tensor '" + tensor.name + "' is stored twice in '" + file->path() + "'");
    set.tensors_.emplace(tensor.name, std::move(tensor));
  }
  set.files_.push_back(std::move(file));
  return set;
}

TensorSet TensorSet::open_index(const std::string& index_path) {
  const json index = parse_json_text(read_file_limited(index_path, kMaxJsonFileBytes, "safetensors index"),
                                     "'" + index_path + "'", 64);
  if (!index.is_object() || !index.contains("weight_map") || !index["weight_map"].is_object())
    throw Error("'" + index_path + "' has no weight_map object");
  const auto dir = std::filesystem::path(index_path).parent_path();
  std::set<std::string> shard_names;
  for (const auto& [name, shard] : index["weight_map"].items()) {
    if (!shard.is_string())
      throw Error("'" + index_path + "': weight_map entry '" + name + "' is not a file name");
    const std::string file = shard.get<std::string>();
    if (file.find('/') != std::string::npos || file == ".." || file.empty())
      throw Error("'" + index_path + "': shard name '" + file + "' must be a plain file name");
    shard_names.insert(file);
  }
  if (shard_names.empty()) throw Error("'" + index_path + "' lists no shards");
  TensorSet set;
  for (const auto& shard : shard_names) set.add_file((dir / shard).string());
  for (const auto& [name, shard] : index["weight_map"].items()) {
    const StoredTensor* tensor = set.find(name);
    const std::string expected = (dir / shard.get<std::string>()).string();
    if (tensor == nullptr || tensor->file != expected)
      throw Error("'" + index_path + "' maps tensor '" + name + "' to '" + shard.get<std::string>() +
                  "', which does not contain it");
  }
  return set;
}

TensorSet TensorSet::open_dir(const std::string& dir) {
  // In order of preference: safetensors needs no parsing beyond JSON, and a folder that has
  // both forms is read from the safetensors one. A single file next to an index of the same form
  // is refused: one of them is stale (a checkpoint written over another), and which one holds
  // the intended weights cannot be told.
  const std::filesystem::path folder(dir);
  for (const char* single : {"model.safetensors", "pytorch_model.bin"}) {
    const std::string index = std::string(single) + ".index.json";
    if (std::filesystem::exists(folder / single) && std::filesystem::exists(folder / index))
      throw Error("'" + dir + "' holds both " + single + " and " + index +
                  ", so which is the checkpoint is ambiguous; remove the stale one");
  }
  if (std::filesystem::exists(folder / "model.safetensors"))
    return open_file((folder / "model.safetensors").string());
  if (std::filesystem::exists(folder / "model.safetensors.index.json"))
    return open_index((folder / "model.safetensors.index.json").string());
  if (std::filesystem::exists(folder / "pytorch_model.bin"))
    return open_file((folder / "pytorch_model.bin").string());
  if (std::filesystem::exists(folder / "pytorch_model.bin.index.json"))
    return open_index((folder / "pytorch_model.bin.index.json").string());
  throw Error("'" + dir +
              "' contains none of model.safetensors, model.safetensors.index.json, pytorch_model.bin, "
              "pytorch_model.bin.index.json");
}

void TensorSet::release_pages(const StoredTensor& tensor) const {
  for (const auto& file : files_) file->release(tensor.data, tensor.byte_size);
}

const StoredTensor* TensorSet::find(const std::string& name) const {
  auto it = tensors_.find(name);
  return it == tensors_.end() ? nullptr : &it->second;
}

std::vector<uint8_t> encode_f32(const std::vector<float>& values, DType dtype) {
  std::vector<uint8_t> bytes(values.size() * dtype_size(dtype));
  if (dtype == DType::F32) {
    // std::copy rather than memcpy: an empty vector's data() may be null, which memcpy forbids.
    std::copy_n(reinterpret_cast<const uint8_t*>(values.data()), bytes.size(), bytes.begin());
    return bytes;
  }
  for (size_t i = 0; i < values.size(); ++i) {
    const uint16_t half = dtype == DType::BF16 ? f32_to_bf16(values[i]) : f32_to_f16(values[i]);
    bytes[2 * i] = static_cast<uint8_t>(half & 0xff);
    bytes[2 * i + 1] = static_cast<uint8_t>(half >> 8);
  }
  return bytes;
}

void SafetensorsWriter::add(const std::string& name, DType dtype, std::vector<int64_t> shape,
                            std::vector<uint8_t> bytes) {
  add_raw(name, header_dtype(dtype), std::move(shape), std::move(bytes));
}

void SafetensorsWriter::add_raw(const std::string& name, const std::string& dtype, std::vector<int64_t> shape,
                                std::vector<uint8_t> bytes) {
  entries_.push_back({name, dtype, std::move(shape), std::move(bytes)});
}

void SafetensorsWriter::add_f32(const std::string& name, std::vector<int64_t> shape,
                                const std::vector<float>& values, DType store_as) {
  add(name, store_as, std::move(shape), encode_f32(values, store_as));
}

size_t SafetensorsWriter::byte_size() const {
  size_t total = 0;
  for (const auto& entry : entries_) total += entry.bytes.size();
  return total;
}

void SafetensorsWriter::write(const std::string& path) const {
  json header = json::object();
  if (!metadata_.empty()) header["__metadata__"] = metadata_;
  uint64_t offset = 0;
  for (const auto& entry : entries_) {
    header[entry.name] = {{"dtype", entry.dtype},
                          {"shape", entry.shape},
                          {"data_offsets", {offset, offset + entry.bytes.size()}}};
    offset += entry.bytes.size();
  }
  std::string header_text = header.dump();
  // The format recommends padding the header so the data section starts 8-byte aligned.
  while ((header_text.size() + 8) % 8 != 0) header_text.push_back(' ');
  std::vector<uint8_t> file(8 + header_text.size() + offset);
  const uint64_t length = header_text.size();
  for (int i = 0; i < 8; ++i) file[i] = static_cast<uint8_t>(length >> (8 * i));
  std::memcpy(file.data() + 8, header_text.data(), header_text.size());
  size_t position = 8 + header_text.size();
  for (const auto& entry : entries_) {
    std::copy(entry.bytes.begin(), entry.bytes.end(), file.begin() + static_cast<std::ptrdiff_t>(position));
    position += entry.bytes.size();
  }
  write_file_atomically(path, file);
}

}  // namespace mb

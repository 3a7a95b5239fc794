// SPDX-License-Identifier: MIT
#include "io/torch_checkpoint.h"

#include <algorithm>
#include <filesystem>
#include <map>
#include <set>

#include "core/error.h"
#include "io/torch_pickle.h"
#include "io/zip_archive.h"

namespace mb {
namespace {

// data.pkl of a real checkpoint is a few hundred bytes per tensor; this bounds the work and
// memory a hostile pickle can ask for while leaving room for a million tensors.
constexpr uint64_t kMaxPickleBytes = uint64_t{64} << 20;
constexpr uint64_t kMaxExtent = uint64_t{1} << 40;
constexpr uint64_t kMaxElements = uint64_t{1} << 48;

std::string entry_text(std::span<const uint8_t> bytes, const ZipEntry& entry) {
  return std::string(reinterpret_cast<const char*>(bytes.data() + entry.data_offset), entry.size);
}

// Checks `sizes` and `strides` of tensor `where` and returns its element count.
uint64_t checked_element_count(const std::vector<int64_t>& sizes, const std::vector<int64_t>& strides,
                               const std::string& where) {
  if (strides.size() != sizes.size())
    throw Error(where + " has " + std::to_string(sizes.size()) + " sizes but " +
                std::to_string(strides.size()) + " strides");
  uint64_t elements = 1;
  for (int64_t extent : sizes) {
    if (extent < 0) throw Error(where + " has a negative size " + std::to_string(extent));
    const auto u = static_cast<uint64_t>(extent);
    if (u > kMaxExtent || (u != 0 && elements > kMaxElements / u))
      throw Error(where + " has an implausibly large shape");
    elements *= u;
  }
  // Row-major contiguity, ignoring the strides of size-1 dimensions as PyTorch does: they
  // never move through memory, so any value describes the same layout.
  if (elements > 0) {
    int64_t expected = 1;
    for (size_t d = sizes.size(); d-- > 0;) {
      if (sizes[d] != 1 && strides[d] != expected) {
        std::string text;
        for (size_t i = 0; i < strides.size(); ++i) text += (i ? ", " : "") + std::to_string(strides[i]);
        throw Error(where + " has strides (" + text +
                    "), which are not contiguous row-major; only contiguous "
                    "tensors can be read in place");
      }
      expected *= sizes[d];
    }
  }
  return elements;
}

}  // namespace

bool looks_like_zip(std::span<const uint8_t> bytes) {
  return bytes.size() >= 4 && bytes[0] == 'P' && bytes[1] == 'K' && bytes[2] == 3 && bytes[3] == 4;
}

std::vector<StoredTensor> read_torch_checkpoint(const MappedFile& file) {
  const std::string& path = file.path();
  const auto bytes = file.bytes();
  const std::string where = "'" + path + "'";
  const std::vector<ZipEntry> entries = read_zip_directory(bytes, path);
  if (entries.empty()) throw Error(where + ": the zip archive is empty");

  // Every record lives in one top-level folder, whose name the first entry gives.
  const std::string& first = entries.front().name;
  const size_t slash = first.find('/');
  if (slash == std::string::npos || slash == 0)
    throw Error(where + ": zip entry '" + printable(first) +
                "' is not inside a folder, as torch.save's records are");
  const std::string prefix = first.substr(0, slash + 1);
  std::map<std::string, const ZipEntry*> records;
  for (const ZipEntry& entry : entries) {
    if (entry.name.compare(0, prefix.size(), prefix) != 0)
      throw Error(where + ": zip entry '" + printable(entry.name) + "' is outside the archive folder '" +
                  prefix + "'");
    records[entry.name.substr(prefix.size())] = &entry;
  }
  auto record = [&](const std::string& name) -> const ZipEntry* {
    auto it = records.find(name);
    return it == records.end() ? nullptr : it->second;
  };
  auto verified = [&](const ZipEntry& entry) {
    // A zero CRC is what PyTorch records when it was told not to compute checksums.
    if (entry.crc32 != 0 && crc32(bytes.subspan(entry.data_offset, entry.size)) != entry.crc32)
      throw Error(where + ": zip entry '" + printable(entry.name) +
                  "' fails its CRC-32 check (the file is corrupt)");
    return entry_text(bytes, entry);
  };

  const ZipEntry* pickle_entry = record("data.pkl");
  if (pickle_entry == nullptr)
    throw Error(where + ": no '" + prefix + "data.pkl' in the archive (not a torch.save checkpoint)");
  const ZipEntry* version_entry = record("version") ? record("version") : record(".data/version");
  if (version_entry == nullptr) throw Error(where + ": no '" + prefix + "version' record in the archive");
  std::string version = verified(*version_entry);
  if (!version.empty() && version.back() == '\n') version.pop_back();
  if (version.empty() || version.size() > 4 ||
      !std::all_of(version.begin(), version.end(), [](char c) { return c >= '0' && c <= '9'; }))
    throw Error(where + ": archive version '" + printable(version) + "' is not a number");
  if (const ZipEntry* byteorder = record("byteorder")) {
    const std::string order = verified(*byteorder);
    if (order != "little")
      throw Error(where + ": byteorder is '" + printable(order) +
                  "'; only little-endian checkpoints are supported");
  }
  if (pickle_entry->size > kMaxPickleBytes)
    throw Error(where + ": data.pkl has " + std::to_string(pickle_entry->size) + " bytes, more than the " +
                std::to_string(kMaxPickleBytes) + " a state_dict needs");
  verified(*pickle_entry);
  const PickledStateDict state =
      unpickle_state_dict(bytes.subspan(pickle_entry->data_offset, pickle_entry->size), where + ": data.pkl");

  // Storages referred to by several tensors must agree on their type and size.
  std::map<std::string, const PickledStorage*> storage_by_key;
  std::vector<StoredTensor> tensors;
  std::set<std::string> names;
  for (const PickledTensor& pickled : state.tensors) {
    const std::string tensor_where = where + ": tensor '" + printable(pickled.name) + "'";
    if (!names.insert(pickled.name).second) throw Error(tensor_where + " appears twice");
    const PickledStorage& storage = state.storages[pickled.storage];
    const StorageType& type = storage_types()[storage.type];
    auto [known, inserted] = storage_by_key.emplace(storage.key, &storage);
    if (!inserted && (known->second->type != storage.type || known->second->numel != storage.numel))
      throw Error(tensor_where + " describes storage '" + printable(storage.key) +
                  "' with a different type or size than an earlier tensor");
    const ZipEntry* data = record("data/" + storage.key);
    if (data == nullptr)
      throw Error(tensor_where + " refers to storage '" + printable(storage.key) +
                  "', but the archive has no '" + prefix + "data/" + printable(storage.key) + "'");
    if (storage.numel < 0 || static_cast<uint64_t>(storage.numel) > data->size / type.element_size ||
        static_cast<uint64_t>(storage.numel) * type.element_size != data->size) {
      throw Error(tensor_where + ": storage '" + printable(storage.key) + "' declares " +
                  std::to_string(storage.numel) + " " + type.dtype + " elements but its record has " +
                  std::to_string(data->size) + " bytes");
    }
    const uint64_t elements = checked_element_count(pickled.sizes, pickled.strides, tensor_where);
    const auto storage_elements = static_cast<uint64_t>(storage.numel);
    if (pickled.offset < 0 || static_cast<uint64_t>(pickled.offset) > storage_elements ||
        elements > storage_elements - static_cast<uint64_t>(pickled.offset)) {
      throw Error(tensor_where + ": " + std::to_string(elements) + " elements from offset " +
                  std::to_string(pickled.offset) + " run past the end of its " +
                  std::to_string(storage_elements) + "-element storage '" + printable(storage.key) + "'");
    }
    StoredTensor tensor;
    tensor.name = pickled.name;
    tensor.dtype_string = type.dtype;
    tensor.dtype = type.compute_dtype;
    tensor.shape = pickled.sizes;
    tensor.data =
        bytes.data() + data->data_offset + static_cast<uint64_t>(pickled.offset) * type.element_size;
    tensor.byte_size = elements * type.element_size;
    tensor.file = path;
    tensors.push_back(std::move(tensor));
  }
  return tensors;
}

size_t TorchCheckpointWriter::add_storage(const std::string& dtype, std::vector<uint8_t> bytes) {
  const StorageType* type = storage_type_for_dtype(dtype);
  if (type == nullptr) throw Error("torch checkpoint writer: unknown dtype '" + dtype + "'");
  if (bytes.size() % type->element_size != 0)
    throw Error("torch checkpoint writer: " + std::to_string(bytes.size()) +
                " bytes are not a whole number of " + dtype + " elements");
  storages_.push_back({dtype, std::move(bytes)});
  return storages_.size() - 1;
}

void TorchCheckpointWriter::add_view(const std::string& name, size_t storage, int64_t offset,
                                     std::vector<int64_t> shape) {
  MB_CHECK(storage < storages_.size());
  const size_t element_size = storage_type_for_dtype(storages_[storage].dtype)->element_size;
  const uint64_t available = storages_[storage].bytes.size() / element_size;
  uint64_t elements = 1;
  for (int64_t extent : shape) {
    MB_CHECK(extent >= 0);
    elements *= static_cast<uint64_t>(extent);
  }
  if (offset < 0 || static_cast<uint64_t>(offset) > available ||
      elements > available - static_cast<uint64_t>(offset))
    throw Error("torch checkpoint writer: tensor '" + name + "' does not fit in its storage");
  views_.push_back({name, storage, offset, std::move(shape)});
}

void TorchCheckpointWriter::add(const std::string& name, const std::string& dtype, std::vector<int64_t> shape,
                                std::vector<uint8_t> bytes) {
  add_view(name, add_storage(dtype, std::move(bytes)), 0, std::move(shape));
}

void TorchCheckpointWriter::add_f32(const std::string& name, std::vector<int64_t> shape,
                                    const std::vector<float>& values, DType store_as) {
  if (dtype_is_quantized(store_as))
    throw Error("torch checkpoint writer: cannot store tensor '" + name + "' as " + std::string(dtype_name(store_as)));
  const char* dtype = store_as == DType::F32 ? "F32" : store_as == DType::BF16 ? "BF16" : "F16";
  add(name, dtype, std::move(shape), encode_f32(values, store_as));
}

std::vector<uint8_t> TorchCheckpointWriter::serialize(const std::string& archive_name) const {
  // Storage keys are numbered in order of first use, as torch.save's persistent_id does.
  std::vector<std::string> keys(storages_.size());
  size_t next_key = 0;
  std::vector<PickleTensorRecord> records;
  for (const View& view : views_) {
    if (keys[view.storage].empty()) keys[view.storage] = std::to_string(next_key++);
    const Storage& storage = storages_[view.storage];
    const StorageType* type = storage_type_for_dtype(storage.dtype);
    records.push_back({view.name, type, keys[view.storage],
                       static_cast<int64_t>(storage.bytes.size() / type->element_size), view.offset,
                       view.shape});
  }
  const std::vector<uint8_t> pickle = pickle_state_dict(records);

  ZipWriter zip;
  const std::string folder = archive_name + "/";
  zip.add(folder + "data.pkl", pickle);
  const std::string byteorder = "little";
  zip.add(folder + "byteorder",
          std::span(reinterpret_cast<const uint8_t*>(byteorder.data()), byteorder.size()));
  // torch.save (up to PyTorch 2.4) writes the storages in the string order of their keys.
  std::vector<size_t> order;
  for (size_t i = 0; i < storages_.size(); ++i)
    if (!keys[i].empty()) order.push_back(i);
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return keys[a] < keys[b]; });
  for (size_t i : order) zip.add(folder + "data/" + keys[i], storages_[i].bytes);
  const std::string version = "3\n";
  zip.add(folder + "version", std::span(reinterpret_cast<const uint8_t*>(version.data()), version.size()));
  return zip.finish();
}

void TorchCheckpointWriter::write(const std::string& path) const {
  std::string stem = std::filesystem::path(path).stem().string();
  if (stem.empty()) stem = "archive";
  write_file_atomically(path, serialize(stem));
}

void write_torch_checkpoint(const std::string& path, const std::vector<StoredTensor>& tensors) {
  TorchCheckpointWriter writer;
  for (const StoredTensor& tensor : tensors)
    writer.add(tensor.name, tensor.dtype_string, tensor.shape,
               std::vector<uint8_t>(tensor.data, tensor.data + tensor.byte_size));
  writer.write(path);
}

}  // namespace mb

// SPDX-License-Identifier: MIT
#include "engine/state_file.h"

#include <cmath>
#include <cstring>

#include "core/error.h"
#include "io/binary_codec.h"
#include "io/mapped_file.h"

namespace mb {
namespace {

constexpr char kMagic[8] = {'M', 'B', 'S', 'T', 'A', 'T', 'E', '1'};
// 2: the model fingerprint is built from every declared config key that changes the math
// (hash_family_keys), so a version-1 file's fingerprint would not match even the same model.
constexpr uint32_t kVersion = 2;
constexpr size_t kHeaderBytes = 8 + 4 + 4 + 8 + 8 + 8;

using binary::get;
using binary::put;
constexpr auto checksum = binary::fnv1a64;

}  // namespace

std::vector<uint8_t> serialize_state(const Model& model, const SequenceState& state) {
  model.state_layout().check_size(state.floats(), "the state to save", state.position);
  std::vector<uint8_t> out;
  out.reserve(kHeaderBytes + state.floats() * 4 + 8);
  out.resize(8);
  std::memcpy(out.data(), kMagic, 8);
  put<uint32_t>(out, kVersion);
  put<uint32_t>(out, static_cast<uint32_t>(model.config().arch));
  put<uint64_t>(out, model.fingerprint());
  put<uint64_t>(out, state.floats());
  put<int64_t>(out, state.position);
  // The host form: a state held by a device is downloaded here, as the caller asks by saving it.
  const std::vector<float> current = state.download();
  const auto* values = reinterpret_cast<const uint8_t*>(current.data());
  out.insert(out.end(), values, values + current.size() * 4);
  put<uint64_t>(out, checksum(out.data(), out.size()));
  return out;
}

void save_state(const std::string& path, const Model& model, const SequenceState& state) {
  write_file_atomically(path, serialize_state(model, state));
}

SequenceState load_state(const std::string& path, const Model& model) {
  const MappedFile file(path);
  return parse_state(file.bytes(), model, "state file '" + path + "'");
}

SequenceState parse_state(std::span<const uint8_t> bytes, const Model& model, const std::string& where) {
  if (bytes.size() < kHeaderBytes + 8 || std::memcmp(bytes.data(), kMagic, 8) != 0)
    throw Error(where + " is not a mambacpp state file");
  const uint32_t version = get<uint32_t>(bytes.data() + 8);
  if (version < kVersion)
    throw Error(where + " was written by an older version of mambacpp (format version " +
                std::to_string(version) + "; this one reads " + std::to_string(kVersion) +
                "): save it again");
  if (version != kVersion)
    throw Error(where + " has format version " + std::to_string(version) + ", expected " +
                std::to_string(kVersion));
  const uint64_t fingerprint = get<uint64_t>(bytes.data() + 16);
  const uint64_t count = get<uint64_t>(bytes.data() + 24);
  const int64_t position = get<int64_t>(bytes.data() + 32);
  if (get<uint32_t>(bytes.data() + 12) != static_cast<uint32_t>(model.config().arch) ||
      fingerprint != model.fingerprint())
    throw Error(where + " was saved from a different model (other weights, or a config.json value that " +
                "changes the computation, such as the expert top-k or the RoPE base, differs)");
  if (position < 0) throw Error(where + " has a negative position");
  model.state_layout().check_size(count, where, position);
  if (bytes.size() != kHeaderBytes + count * 4 + 8)
    throw Error(where + " is truncated or has trailing bytes");
  const size_t payload = kHeaderBytes + count * 4;
  if (checksum(bytes.data(), payload) != get<uint64_t>(bytes.data() + payload))
    throw Error(where + " is corrupted (checksum mismatch)");
  std::vector<float> values(count);
  std::memcpy(values.data(), bytes.data() + kHeaderBytes, count * 4);
  // A checksum proves only that the bytes are the ones written: a state that went to NaN or
  // infinity (a writer's bug, or a file made to pass the check) would poison every reply resumed
  // from it, so it is refused (and the prefix store removes such a file).
  for (size_t i = 0; i < count; ++i)
    if (!std::isfinite(values[i]))
      throw Error(where + " holds a state value that is not finite (" + std::to_string(values[i]) +
                  " at value " + std::to_string(i) + " of " + std::to_string(count) + ")");
  return model.state_from_host(values, position, where);
}

}  // namespace mb

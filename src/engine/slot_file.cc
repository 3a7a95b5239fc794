// SPDX-License-Identifier: MIT
#include "engine/slot_file.h"

#include <cstring>

#include "core/error.h"
#include "engine/state_file.h"
#include "io/binary_codec.h"
#include "io/mapped_file.h"

namespace mb {
namespace {

constexpr char kMagic[8] = {'M', 'B', 'S', 'L', 'O', 'T', '0', '1'};
// 2: the model fingerprint is built from every declared config key that changes the math
// (hash_family_keys), so a version-1 file's fingerprint would not match even the same model.
constexpr uint32_t kVersion = 2;
constexpr size_t kHeaderBytes = 8 + 4 + 8;  // magic, version, token count

using binary::get;
using binary::put;
constexpr auto checksum = binary::fnv1a64;

}  // namespace

void save_slot_file(const std::string& path, const Model& model, std::span<const int32_t> tokens,
                    const SequenceState& state) {
  if (state.position != static_cast<int64_t>(tokens.size()))
    throw Error("slot '" + path + "': the state has consumed " + std::to_string(state.position) +
                " tokens, not " + std::to_string(tokens.size()));
  const std::vector<uint8_t> state_bytes = serialize_state(model, state);
  std::vector<uint8_t> out;
  out.reserve(kHeaderBytes + tokens.size() * 4 + 8 + state_bytes.size() + 8);
  out.insert(out.end(), kMagic, kMagic + 8);
  put<uint32_t>(out, kVersion);
  put<uint64_t>(out, tokens.size());
  for (int32_t token : tokens) put<int32_t>(out, token);
  put<uint64_t>(out, state_bytes.size());
  out.insert(out.end(), state_bytes.begin(), state_bytes.end());
  put<uint64_t>(out, checksum(out.data(), out.size()));
  write_file_atomically(path, out);
}

SlotFile load_slot_file(const std::string& path, const Model& model) {
  const MappedFile file(path);
  const std::span<const uint8_t> bytes = file.bytes();
  const std::string where = "slot file '" + path + "'";
  if (bytes.size() < kHeaderBytes + 8 + 8 || std::memcmp(bytes.data(), kMagic, 8) != 0)
    throw Error(where + " is not a mambacpp slot file");
  const uint32_t version = get<uint32_t>(bytes.data() + 8);
  if (version < kVersion)
    throw Error(where + " was written by an older version of mambacpp (format version " +
                std::to_string(version) + "; this one reads " + std::to_string(kVersion) +
                "): save it again");
  if (version != kVersion)
    throw Error(where + " has format version " + std::to_string(version) + ", expected " +
                std::to_string(kVersion));
  // Sizes are checked against what is left before they are used, so no count can overflow.
  const uint64_t count = get<uint64_t>(bytes.data() + 12);
  const size_t room = bytes.size() - kHeaderBytes - 16;  // bytes between the header and the two u64 fields
  if (count > room / 4) throw Error(where + " is truncated (its token list runs past the end)");
  const size_t state_at = kHeaderBytes + count * 4 + 8;
  const uint64_t state_size = get<uint64_t>(bytes.data() + state_at - 8);
  if (state_size != bytes.size() - state_at - 8) throw Error(where + " is truncated or has trailing bytes");
  const size_t payload = bytes.size() - 8;
  if (checksum(bytes.data(), payload) != get<uint64_t>(bytes.data() + payload))
    throw Error(where + " is corrupted (checksum mismatch)");

  SlotFile slot;
  slot.tokens.resize(count);
  if (count > 0) std::memcpy(slot.tokens.data(), bytes.data() + kHeaderBytes, count * 4);
  if (count == 0) throw Error(where + " holds an empty prefix");
  for (size_t i = 0; i < count; ++i)
    if (slot.tokens[i] < 0 || slot.tokens[i] >= model.config().vocab_size)
      throw Error(where + ": token " + std::to_string(slot.tokens[i]) + " at position " + std::to_string(i) +
                  " is outside the vocabulary [0, " + std::to_string(model.config().vocab_size) + ")");
  slot.state = parse_state(bytes.subspan(state_at, state_size), model, where);
  if (slot.state.position != static_cast<int64_t>(count))
    throw Error(where + ": its state has consumed " + std::to_string(slot.state.position) +
                " tokens but it lists " + std::to_string(count));
  return slot;
}

}  // namespace mb

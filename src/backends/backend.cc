// SPDX-License-Identifier: MIT
#include "backends/backend.h"

#include <algorithm>
#include <atomic>
#include <cstring>

#include "core/error.h"

namespace mb {

int64_t StateShape::host_floats(int64_t positions) const {
  int64_t floats = fixed_floats;
  for (int64_t per_position : growing) floats += per_position * positions;
  return floats;
}

uint64_t StateStorage::next_id() {
  // Ids only need to differ between storages (and between reallocations of one), in any thread.
  static std::atomic<uint64_t> counter{0};
  return ++counter;
}

int64_t StateStorage::rounded_capacity(int64_t positions) {
  return (positions + kStateBlockPositions - 1) / kStateBlockPositions * kStateBlockPositions;
}

void StateStorage::set_memory(int64_t capacity) {
  capacity_ = capacity;
  id_ = next_id();
}

HostState::HostState(StateShape shape) : StateStorage(std::move(shape)) {
  fixed_.assign(static_cast<size_t>(this->shape().fixed_floats), 0.0f);
  growing_.resize(this->shape().growing.size());
}

HostState::HostState(StateShape shape, int64_t positions, std::span<const float> host)
    : HostState(std::move(shape)) {
  MB_CHECK(static_cast<int64_t>(host.size()) == this->shape().host_floats(positions));
  reserve(positions);
  std::copy_n(host.data(), fixed_.size(), fixed_.data());
  const float* from = host.data() + fixed_.size();
  for (size_t part = 0; part < growing_.size(); ++part) {
    const int64_t width = this->shape().growing[part];
    for (int64_t first = 0; first < positions; first += kStateBlockPositions) {
      const int64_t count = std::min(kStateBlockPositions, positions - first);
      std::copy_n(from, count * width, growing_[part].blocks[first / kStateBlockPositions].get());
      from += count * width;
    }
  }
}

HostState::HostState(StateShape shape, const std::vector<float>& fixed)
    : StateStorage(std::move(shape)), fixed_(fixed) {
  growing_.resize(this->shape().growing.size());
}

void HostState::grow_to(int64_t positions) {
  const int64_t capacity = rounded_capacity(positions);
  const auto blocks = static_cast<size_t>(capacity / kStateBlockPositions);
  for (size_t part = 0; part < growing_.size(); ++part) {
    GrowingPart& g = growing_[part];
    const auto floats = static_cast<size_t>(kStateBlockPositions * shape().growing[part]);
    while (g.blocks.size() < blocks) {
      g.blocks.push_back(std::make_shared<float[]>(floats));  // zero-filled
      g.addresses.push_back(g.blocks.back().get());
    }
  }
  set_memory(capacity);
}

void HostState::reserve(int64_t positions) {
  // New blocks are appended; the blocks already there stay where they are (no copy, however
  // long the context grows).
  if (growing_.empty() || positions <= capacity()) return;
  grow_to(positions);
}

std::unique_ptr<StateStorage> HostState::clone(int64_t positions) const {
  MB_CHECK(growing_.empty() || positions <= capacity());
  std::unique_ptr<HostState> copy(new HostState(shape(), fixed_));
  if (growing_.empty()) return copy;
  // The blocks whose positions are all used are final: shared. The partly used one is copied,
  // since this state goes on writing into it.
  const auto full = static_cast<size_t>(positions / kStateBlockPositions);
  for (size_t part = 0; part < growing_.size(); ++part) {
    copy->growing_[part].blocks.assign(growing_[part].blocks.begin(), growing_[part].blocks.begin() + full);
    copy->growing_[part].addresses.assign(growing_[part].addresses.begin(),
                                          growing_[part].addresses.begin() + full);
  }
  copy->grow_to(positions);
  const int64_t partial = positions % kStateBlockPositions;
  for (size_t part = 0; part < growing_.size() && partial > 0; ++part)
    std::copy_n(growing_[part].blocks[full].get(), partial * shape().growing[part],
                copy->growing_[part].blocks[full].get());
  return copy;
}

void HostState::download(int64_t positions, std::span<float> host) const {
  MB_CHECK(static_cast<int64_t>(host.size()) == shape().host_floats(positions));
  MB_CHECK(growing_.empty() || positions <= capacity());
  float* to = std::copy(fixed_.begin(), fixed_.end(), host.data());
  for (size_t part = 0; part < growing_.size(); ++part) {
    const int64_t width = shape().growing[part];
    for (int64_t first = 0; first < positions; first += kStateBlockPositions) {
      const int64_t count = std::min(kStateBlockPositions, positions - first);
      to = std::copy_n(growing_[part].blocks[first / kStateBlockPositions].get(), count * width, to);
    }
  }
}

float* HostState::writable_row(size_t part, int64_t position) {
  MB_CHECK(part < growing_.size() && position >= 0 && position < capacity());
  std::shared_ptr<float[]>& block = growing_[part].blocks[position / kStateBlockPositions];
  // A block shared with a fork holds used positions only, which are never written again.
  MB_CHECK(block.use_count() == 1);
  return block.get() + (position % kStateBlockPositions) * shape().growing[part];
}

PositionRows HostState::rows(size_t part) const {
  MB_CHECK(part < growing_.size());
  return {growing_[part].addresses.data(), kStateBlockPositions, shape().growing[part]};
}

bool HostState::shares_block(const HostState& other, int64_t block) const {
  if (growing_.empty() || growing_.size() != other.growing_.size()) return false;
  for (size_t part = 0; part < growing_.size(); ++part) {
    const auto b = static_cast<size_t>(block);
    if (b >= growing_[part].blocks.size() || b >= other.growing_[part].blocks.size() ||
        growing_[part].blocks[b] != other.growing_[part].blocks[b])
      return false;
  }
  return true;
}

const char* op_kind_name(OpKind kind) {
  switch (kind) {
    case OpKind::Matmul:
      return "matmul";
    case OpKind::RmsNorm:
      return "rms_norm";
    case OpKind::CausalConv:
      return "causal_conv";
    case OpKind::SelectiveScan:
      return "selective_scan";
    case OpKind::Mamba2Scan:
      return "mamba2_scan";
    case OpKind::GatedRmsNorm:
      return "gated_rms_norm";
    case OpKind::Mamba3Scan:
      return "mamba3_scan";
    case OpKind::Argmax:
      return "argmax";
    case OpKind::AppendRows:
      return "append_rows";
    case OpKind::Attention:
      return "attention";
    case OpKind::Rope:
      return "rope";
    case OpKind::Glu:
      return "glu";
    case OpKind::Scale:
      return "scale";
    case OpKind::Moe:
      return "moe";
    case OpKind::ShortConv:
      return "short_conv";
    case OpKind::GatedDeltaNet:
      return "gated_delta_net";
  }
  return "?";
}

}  // namespace mb

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
    const int64_t floats = this->shape().growing[part] * positions;
    std::copy_n(from, floats, growing_[part].data());
    from += floats;
  }
}

void HostState::reserve(int64_t positions) {
  if (growing_.empty() || positions <= capacity()) return;
  // Geometric growth in whole blocks, so a long decode copies each position a bounded number of
  // times; clone() sizes its copy to the used positions only.
  const int64_t capacity = rounded_capacity(std::max(positions, this->capacity() + this->capacity() / 2));
  for (size_t part = 0; part < growing_.size(); ++part)
    growing_[part].resize(static_cast<size_t>(capacity * shape().growing[part]), 0.0f);
  set_memory(capacity);
}

std::unique_ptr<StateStorage> HostState::clone(int64_t positions) const {
  auto copy = std::make_unique<HostState>(shape());
  copy->fixed_ = fixed_;
  copy->reserve(positions);
  for (size_t part = 0; part < growing_.size(); ++part) {
    const size_t floats = static_cast<size_t>(shape().growing[part] * positions);
    std::copy_n(growing_[part].data(), floats, copy->growing_[part].data());
  }
  return copy;
}

void HostState::download(int64_t positions, std::span<float> host) const {
  MB_CHECK(static_cast<int64_t>(host.size()) == shape().host_floats(positions));
  MB_CHECK(growing_.empty() || positions <= capacity());
  float* to = std::copy(fixed_.begin(), fixed_.end(), host.data());
  for (size_t part = 0; part < growing_.size(); ++part)
    to = std::copy_n(growing_[part].data(), shape().growing[part] * positions, to);
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
    case OpKind::Glu:
      return "glu";
    case OpKind::Scale:
      return "scale";
    case OpKind::Moe:
      return "moe";
  }
  return "?";
}

}  // namespace mb

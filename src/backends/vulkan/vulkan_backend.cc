// SPDX-License-Identifier: MIT
#include "backends/vulkan/vulkan_backend.h"

#include <algorithm>
#include <cstring>
#include <mutex>

#include "backends/cpu/cpu_backend.h"
#include "backends/vulkan/vulkan_buffer.h"
#include "backends/vulkan/vulkan_commands.h"
#include "backends/vulkan/vulkan_ops.h"
#include "core/error.h"
#include "ops/causal_conv.h"
#include "ops/matmul.h"
#include "ops/quant.h"
#include "ops/quant_matmul.h"
#include "ops/selective_scan.h"

namespace mb::vulkan {

// The context and the lock of its one queue, shared with every state and stream made here, so
// those may outlive the backend and still be read or freed. Every upload, download and
// submission holds the lock.
struct VulkanBackend::Shared {
  explicit Shared(const ContextOptions& options) : context(options) {}
  Context context;
  std::mutex mutex;
};

namespace {

using BufferPtr = std::unique_ptr<Buffer>;
using Shared = VulkanBackend::Shared;

// Weight vectors and activation buffers.
class DeviceVector final : public Storage {
 public:
  explicit DeviceVector(BufferPtr buffer) : buffer(std::move(buffer)) {}
  BufferPtr buffer;
};

// A packed weight matrix in pieces of whole panels (64 rows of f32, bf16 or f16 weights; 16 rows
// of quantized tiles).
class DeviceMatrix final : public Storage {
 public:
  struct Piece {
    BufferPtr buffer;
    int64_t first_row = 0, rows = 0;
  };
  std::vector<Piece> pieces;
  DType dtype = DType::F32;
  int64_t cols = 0;
};

uint64_t float_bytes(int64_t floats) {
  return static_cast<uint64_t>(floats) * sizeof(float);
}

// A sequence's state: the fixed region in one buffer, each growing part in its own.
class VulkanState final : public StateStorage {
 public:
  // Zero-filled, or the host form `host` of `positions` positions. The caller holds the lock.
  VulkanState(std::shared_ptr<Shared> shared, StateShape shape, int64_t positions,
              std::span<const float> host)
      : StateStorage(std::move(shape)), shared_(std::move(shared)) {
    Context& context = shared_->context;
    fixed_ = std::make_unique<Buffer>(context, float_bytes(this->shape().fixed_floats));
    growing_.resize(this->shape().growing.size());
    allocate_growing(positions, nullptr, 0);
    if (host.empty()) {
      const std::vector<float> zeros(static_cast<size_t>(this->shape().fixed_floats), 0.0f);
      fixed_->upload(zeros.data(), float_bytes(this->shape().fixed_floats));
      return;
    }
    fixed_->upload(host.data(), float_bytes(this->shape().fixed_floats));
    const float* from = host.data() + this->shape().fixed_floats;
    for (size_t part = 0; part < growing_.size(); ++part) {
      const int64_t floats = this->shape().growing[part] * positions;
      growing_[part]->upload(from, float_bytes(floats));
      from += floats;
    }
  }

  const void* home() const override { return shared_.get(); }

  void reserve(int64_t positions) override {
    if (growing_.empty() || positions <= capacity()) return;
    const std::lock_guard lock(shared_->mutex);
    allocate_growing(std::max(positions, capacity() + capacity() / 2), this, capacity());
  }

  std::unique_ptr<StateStorage> clone(int64_t positions) const override {
    const std::lock_guard lock(shared_->mutex);
    std::unique_ptr<VulkanState> copy(new VulkanState(shared_, shape(), positions));
    copy->fixed_->copy_from(*fixed_, 0, 0, float_bytes(shape().fixed_floats));
    for (size_t part = 0; part < growing_.size(); ++part)
      copy->growing_[part]->copy_from(*growing_[part], 0, 0, float_bytes(shape().growing[part] * positions));
    return copy;
  }

  void download(int64_t positions, std::span<float> host) const override {
    MB_CHECK(static_cast<int64_t>(host.size()) == shape().host_floats(positions));
    const std::lock_guard lock(shared_->mutex);
    fixed_->download(host.data(), float_bytes(shape().fixed_floats));
    float* to = host.data() + shape().fixed_floats;
    for (size_t part = 0; part < growing_.size(); ++part) {
      const int64_t floats = shape().growing[part] * positions;
      growing_[part]->download(to, float_bytes(floats));
      to += floats;
    }
  }

  const Buffer* fixed() const { return fixed_.get(); }
  const Buffer* growing(size_t part) const { return growing_[part].get(); }

 private:
  // An uninitialized copy's storage, with room for `positions` (the caller holds the lock).
  VulkanState(std::shared_ptr<Shared> shared, const StateShape& shape, int64_t positions)
      : StateStorage(shape), shared_(std::move(shared)) {
    fixed_ = std::make_unique<Buffer>(shared_->context, float_bytes(this->shape().fixed_floats));
    growing_.resize(this->shape().growing.size());
    allocate_growing(positions, nullptr, 0);
  }

  // Growing buffers with room for `positions` (in whole blocks), keeping the first `keep`
  // positions of `from`'s.
  void allocate_growing(int64_t positions, const VulkanState* from, int64_t keep) {
    if (growing_.empty()) return;
    const int64_t capacity = rounded_capacity(positions);
    for (size_t part = 0; part < growing_.size(); ++part) {
      auto grown = std::make_unique<Buffer>(shared_->context, float_bytes(capacity * shape().growing[part]));
      if (from != nullptr && keep > 0)
        grown->copy_from(*from->growing_[part], 0, 0, float_bytes(keep * shape().growing[part]));
      growing_[part] = std::move(grown);
    }
    set_memory(capacity);
  }

  std::shared_ptr<Shared> shared_;
  BufferPtr fixed_;
  std::vector<BufferPtr> growing_;
};

// A caller's activations, input staging and last recording. Buffers grow to the largest round
// seen; any reallocation invalidates the recording, whose descriptors name the old buffers.
class VulkanStream final : public Stream {
 public:
  explicit VulkanStream(std::shared_ptr<Shared> shared) : shared(std::move(shared)) {}

  View buffer(int slot, int64_t rows, int64_t width, Access access) override {
    MB_CHECK(!in_round);
    if (slot >= static_cast<int>(slots.size())) slots.resize(slot + 1);
    Slot& held = slots[slot];
    const int64_t floats = std::max<int64_t>(rows * width, 1);
    if (!held.storage || held.floats < floats || held.access != access) {
      const Memory memory = access == Access::HostRead ? Memory::HostVisible : Memory::DeviceLocal;
      held.storage.reset();
      held.storage = std::make_unique<DeviceVector>(
          std::make_unique<Buffer>(shared->context, float_bytes(floats), memory));
      held.floats = floats;
      held.access = access;
      recorded = false;
    }
    return {held.storage.get(), 0, width};
  }
  size_t bytes() const override {
    size_t total = 0;
    for (const Slot& slot : slots) total += static_cast<size_t>(slot.floats) * sizeof(float);
    return total;
  }

  // The host-visible twin of `target` (as large as it) that embed and write_rows fill at the
  // offsets of their rows in `target`. It is never smaller than the target, so it only grows when
  // the target grew, between rounds: a recording's copies keep naming a live staging buffer.
  Buffer& staging_for(const Storage* target) {
    const uint64_t bytes = static_cast<const DeviceVector*>(target)->buffer->bytes();
    for (Staging& s : staging) {
      if (s.target != target) continue;
      if (s.buffer->bytes() < bytes) {
        // A replay stages exactly what its recording did, so only a recording may grow it.
        MB_CHECK(recording);
        s.buffer = std::make_unique<Buffer>(shared->context, bytes, Memory::HostVisible);
      }
      s.dirty = true;
      return *s.buffer;
    }
    MB_CHECK(recording);
    staging.push_back({target, std::make_unique<Buffer>(shared->context, bytes, Memory::HostVisible), true});
    return *staging.back().buffer;
  }

  // Labels the dispatches recorded since the last call with `phase`.
  void mark(PhaseId phase) {
    while (phases.size() < sequence->dispatch_count()) phases.push_back(phase);
  }

  struct Slot {
    std::unique_ptr<DeviceVector> storage;
    int64_t floats = 0;
    Access access = Access::Device;
  };
  struct Staging {
    const Storage* target;
    BufferPtr buffer;
    bool dirty = false;
  };

  std::shared_ptr<Shared> shared;  // declared first: destroyed after every buffer
  std::vector<Slot> slots;
  std::vector<Staging> staging;
  std::unique_ptr<CommandSequence> sequence;
  std::unique_lock<std::mutex> lock;  // held from begin_round to end_round
  bool in_round = false;
  bool recording = false;  // this round records (else it replays the last recording)
  bool recorded = false;   // `sequence` holds a complete recording of recorded_key
  std::vector<uint64_t> key, recorded_key;
  int64_t ops = 0, recorded_ops = 0;  // op calls of this round and of the recording
  std::vector<PhaseId> phases;        // the phase of each dispatch of the recording
  int64_t recordings = 0;
};

}  // namespace

const Buffer& state_buffer(const StateStorage* state) {
  const auto* held = dynamic_cast<const VulkanState*>(state);
  if (held == nullptr)
    throw Error("a part's state is not held by a Vulkan device (no state, or a host state)");
  return *held->fixed();
}

namespace {

VulkanStream& vk(Stream& stream) {
  return static_cast<VulkanStream&>(stream);
}

// Counts an op call of the round; true when the op must record its dispatches.
bool recording_op(VulkanStream& s) {
  MB_CHECK(s.in_round);
  ++s.ops;
  return s.recording;
}

const Buffer* buffer_of(View v) {
  return v ? static_cast<const DeviceVector*>(v.storage)->buffer.get() : nullptr;
}

uint64_t offset_of(View v) {
  return static_cast<uint64_t>(v.offset);
}

const DeviceMatrix& matrix_of(const Matrix& m) {
  return *static_cast<const DeviceMatrix*>(m.storage);
}

// y[:, rows] (+)= x W^T (+ bias) over every piece of W: one matmul dispatch per piece, writing
// the piece's columns of y. With a norm weight, x's rows are RMS-normalized inside each dispatch.
void record_product(CommandSequence& seq, const DeviceMatrix& w, View x, int64_t m, View bias, View y,
                    bool accumulate, bool softplus, View norm = {}, float norm_eps = 0.0f) {
  if (dtype_is_quantized(w.dtype)) {
    // One op over every piece: a prefill round quantizes its rows once for all of them.
    std::vector<GpuQuantPiece> pieces;
    for (const DeviceMatrix::Piece& piece : w.pieces)
      pieces.push_back({piece.buffer.get(), piece.first_row, piece.rows});
    record_quant_matmul(seq, {buffer_of(x), offset_of(x), x.ld, m, w.dtype, w.cols, pieces, buffer_of(bias),
                              bias ? offset_of(bias) : 0, buffer_of(y), offset_of(y), y.ld, accumulate,
                              softplus, buffer_of(norm), offset_of(norm), norm_eps});
    return;
  }
  for (const DeviceMatrix::Piece& piece : w.pieces) {
    record_matmul(
        seq, {buffer_of(x), offset_of(x), x.ld, m, piece.buffer.get(), 0, w.dtype, piece.rows, w.cols,
              buffer_of(bias), bias ? offset_of(bias) + static_cast<uint64_t>(piece.first_row) : 0,
              buffer_of(y), offset_of(y) + static_cast<uint64_t>(piece.first_row), y.ld, accumulate, softplus,
              buffer_of(norm), offset_of(norm), norm_eps});
  }
}

// Records the copy of `rows` x `cols` floats of y's rows from their place in `staging` (y's
// host-visible twin) into y: one copy when the rows are contiguous, else one per row, so the
// floats between rows keep their values.
void copy_rows(CommandSequence& seq, const Buffer& staging, View y, int64_t rows, int64_t cols,
               const char* label) {
  const bool contiguous = y.ld == cols;
  const int64_t runs = contiguous ? 1 : rows, rows_per_run = contiguous ? rows : 1;
  for (int64_t run = 0; run < runs; ++run) {
    const uint64_t at = float_bytes(y.row(run * rows_per_run).offset);
    seq.copy(staging, at, *buffer_of(y), at, float_bytes(rows_per_run * cols), label);
  }
}

// The positions per SSD chunk of a round: the op's chunk, or the longest part when shorter (as
// the CPU backend cuts them).
int64_t ssd_chunk_for(int64_t chunk, std::span<const Part> parts) {
  int64_t longest = 1;
  for (const Part& part : parts) longest = std::max(longest, part.rows);
  return std::min(chunk, longest);
}

}  // namespace

VulkanBackend::VulkanBackend(const ContextOptions& options, uint64_t max_piece_bytes)
    : shared_(std::make_shared<Shared>(options)) {
  max_piece_bytes_ = shared_->context.info().max_storage_buffer_bytes;
  if (max_piece_bytes > 0) max_piece_bytes_ = std::min(max_piece_bytes_, max_piece_bytes);
}

VulkanBackend::~VulkanBackend() = default;

Context& VulkanBackend::context() const {
  return shared_->context;
}

std::string VulkanBackend::description() const {
  const DeviceInfo& info = shared_->context.info();
  return "vulkan:" + std::to_string(info.index) + " (" + info.name + ", " + info.driver + ")";
}

std::string VulkanBackend::why_unsupported(const OpQuery& query) const {
  switch (query.kind) {
    case OpKind::Matmul:
      return "";  // f32, bf16, f16 and every quantized dtype
    case OpKind::SelectiveScan:
      return query.size <= kMaxStateSize ? "" : "the Vulkan scan supports d_state up to 256";
    case OpKind::CausalConv:
      return query.size <= kMaxConvKernel ? "" : "the Vulkan conv supports kernels of up to 16 taps";
    case OpKind::Mamba2Scan:
      return query.size <= kMaxScanStates ? "" : "the Vulkan Mamba-2 scan supports d_state up to 256";
    case OpKind::GatedRmsNorm:
      return "";
    case OpKind::Mamba3Scan:
      if (query.size > kMaxScanStates) return "the Vulkan Mamba-3 scan supports d_state up to 256";
      return shared_->context.info().float64
                 ? ""
                 : "the Vulkan Mamba-3 scan needs shaderFloat64 (its RoPE phases are updated in double "
                   "precision, as on the CPU), which " +
                       shared_->context.info().name + " lacks; run this model with --device cpu";
    case OpKind::Rope:
      return "the Vulkan backend does not run rotary position embeddings (RoPE) yet, like the rest of the "
             "attention blocks; run this one with --device cpu";
    case OpKind::Attention:
    case OpKind::Glu:
    case OpKind::Scale:
      return "the Vulkan backend does not run the hybrid models' attention and MLP blocks yet; run this one "
             "with --device cpu";
    case OpKind::Moe:
      return "the Vulkan backend does not run mixture-of-experts layers yet; run this one with --device cpu";
    case OpKind::ShortConv:
      return "the Vulkan backend does not run LFM2's gated short convolutions yet; run this one with "
             "--device cpu";
    case OpKind::GatedDeltaNet:
      return "the Vulkan backend does not run Gated DeltaNet layers (Qwen3.5, Qwen3-Next) yet; run this one "
             "with --device cpu";
    case OpKind::RmsNorm:
    case OpKind::Argmax:
    case OpKind::AppendRows:
      return "";
  }
  return "";
}

std::unique_ptr<Storage> VulkanBackend::upload_matrix(const WeightMatrix& host) const {
  auto uploaded = std::make_unique<DeviceMatrix>();
  uploaded->dtype = host.dtype;
  uploaded->cols = host.cols;
  // The packed panels exactly as the CPU kernels read them, cut into runs of whole panels that
  // one storage binding can span: [panels][cols][64] in the dtype for float weights, and for
  // quantized ones the tiles of ops/quant_matmul.h as they are (16-row panels of cols / block
  // tiles; nothing is dequantized).
  const bool quantized = dtype_is_quantized(host.dtype);
  const int64_t panel_rows = quantized ? kQuantPanel : kPanelWidth;
  const uint64_t panel_bytes = quantized
                                   ? static_cast<uint64_t>(host.cols / dtype_block_weights(host.dtype)) *
                                         kQuantPanel * dtype_block_bytes(host.dtype)
                                   : static_cast<uint64_t>(host.cols * kPanelWidth) * dtype_size(host.dtype);
  if (panel_bytes > max_piece_bytes_)
    throw Error("one " + std::to_string(panel_rows) + "-row panel of a " + std::to_string(host.cols) +
                "-column matrix exceeds what a storage binding may span on " + shared_->context.info().name);
  const int64_t panels_per_piece = static_cast<int64_t>(max_piece_bytes_ / panel_bytes);
  const int64_t panel_count = (host.rows + panel_rows - 1) / panel_rows;
  const std::lock_guard lock(shared_->mutex);
  for (int64_t panel = 0; panel < panel_count; panel += panels_per_piece) {
    const int64_t panels = std::min(panels_per_piece, panel_count - panel);
    DeviceMatrix::Piece piece;
    piece.first_row = panel * panel_rows;
    piece.rows = std::min(panels * panel_rows, host.rows - piece.first_row);
    piece.buffer = std::make_unique<Buffer>(shared_->context, panels * panel_bytes);
    piece.buffer->upload(static_cast<const uint8_t*>(host.data) + panel * panel_bytes, panels * panel_bytes);
    uploaded->pieces.push_back(std::move(piece));
  }
  return uploaded;
}

std::unique_ptr<Storage> VulkanBackend::upload_floats(const float* host, int64_t count) const {
  const std::lock_guard lock(shared_->mutex);
  auto buffer = std::make_unique<Buffer>(shared_->context, float_bytes(count));
  buffer->upload(host, float_bytes(count));
  return std::make_unique<DeviceVector>(std::move(buffer));
}

std::unique_ptr<StateStorage> VulkanBackend::new_state(const StateShape& shape) const {
  const std::lock_guard lock(shared_->mutex);
  return std::make_unique<VulkanState>(shared_, shape, 0, std::span<const float>());
}

std::unique_ptr<StateStorage> VulkanBackend::adopt_state(const StateShape& shape, int64_t positions,
                                                         std::span<const float> host) const {
  MB_CHECK(static_cast<int64_t>(host.size()) == shape.host_floats(positions));
  const std::lock_guard lock(shared_->mutex);
  if (host.empty()) return std::make_unique<VulkanState>(shared_, shape, positions, std::span<const float>());
  return std::make_unique<VulkanState>(shared_, shape, positions, host);
}

const void* VulkanBackend::state_home() const {
  return shared_.get();
}

std::unique_ptr<Stream> VulkanBackend::new_stream() const {
  return std::make_unique<VulkanStream>(shared_);
}

bool VulkanBackend::owns(const Stream& stream) const {
  const auto* held = dynamic_cast<const VulkanStream*>(&stream);
  return held != nullptr && held->shared == shared_;
}

void VulkanBackend::begin_round(Stream& stream, const ComputeContext&, std::span<const uint64_t> key) const {
  VulkanStream& s = vk(stream);
  MB_CHECK(!s.in_round);
  s.lock = std::unique_lock(shared_->mutex);
  s.in_round = true;
  s.ops = 0;
  s.key.assign(key.begin(), key.end());
  // Replay the last recording when this round has its key; record otherwise.
  s.recording = !(s.recorded && s.key == s.recorded_key);
  if (!s.recording) return;
  s.recorded = false;
  if (!s.sequence) s.sequence = std::make_unique<CommandSequence>(shared_->context);
  s.sequence->begin();
  s.phases.clear();
}

void VulkanBackend::end_round(Stream& stream) const {
  VulkanStream& s = vk(stream);
  MB_CHECK(s.in_round);
  if (s.recording) {
    s.sequence->end();
    s.recorded = true;
    s.recorded_key = s.key;
    s.recorded_ops = s.ops;
    ++s.recordings;
  } else if (s.ops != s.recorded_ops) {
    throw Error("a replayed Vulkan round issued " + std::to_string(s.ops) + " ops where its recording had " +
                std::to_string(s.recorded_ops) + " (the round key misses something that changes the ops)");
  }
  for (VulkanStream::Staging& staging : s.staging) {
    if (!staging.dirty) continue;
    staging.buffer->flush();
    staging.dirty = false;
  }
  s.sequence->run();
  const std::vector<DispatchTime> times = s.sequence->last_timings();
  for (size_t i = 0; i < times.size() && i < s.phases.size(); ++i) {
    auto held = std::find_if(s.timings.begin(), s.timings.end(),
                             [&](const PhaseTime& time) { return time.phase == s.phases[i]; });
    if (held == s.timings.end()) {
      s.timings.push_back({s.phases[i], times[i].milliseconds, 1});
    } else {
      held->milliseconds += times[i].milliseconds;
      ++held->dispatches;
    }
  }
  s.in_round = false;
  s.lock.unlock();
}

void VulkanBackend::cancel_round(Stream& stream) const {
  VulkanStream& s = vk(stream);
  if (!s.in_round) return;
  // A partial recording is never replayed: the next round records afresh.
  s.recorded = false;
  s.in_round = false;
  s.lock.unlock();
}

void VulkanBackend::read_rows(Stream&, View from, int64_t rows, int64_t cols, float* host) const {
  const Buffer* buffer = buffer_of(from);
  MB_CHECK(buffer->mapped() != nullptr);
  buffer->invalidate();
  const float* source = static_cast<const float*>(buffer->mapped()) + from.offset;
  for (int64_t r = 0; r < rows; ++r) std::memcpy(host + r * cols, source + r * from.ld, cols * sizeof(float));
}

int64_t VulkanBackend::recordings(const Stream& stream) {
  const auto* s = dynamic_cast<const VulkanStream*>(&stream);
  return s != nullptr ? s->recordings : 0;
}

std::vector<PhaseId> VulkanBackend::recorded_phases(const Stream& stream) {
  const auto* s = dynamic_cast<const VulkanStream*>(&stream);
  return s != nullptr ? s->phases : std::vector<PhaseId>{};
}

void VulkanBackend::matmul(Stream& stream, const MatmulOp& op) const {
  VulkanStream& s = vk(stream);
  if (!recording_op(s)) return;
  // The layer norm runs inside the product's dispatches: the normalized rows never reach memory.
  record_product(*s.sequence, matrix_of(op.w), op.x, op.m, op.bias, op.y, op.accumulate, op.softplus,
                 op.norm.weight, op.norm.eps);
  s.mark(op.phase);
}

void VulkanBackend::rms_norm(Stream& stream, const RmsNormOp& op) const {
  VulkanStream& s = vk(stream);
  if (!recording_op(s)) return;
  // Segments sharing one weight buffer take one dispatch; others one each.
  const bool shared_weight = std::all_of(op.segments.begin(), op.segments.end(), [&](const NormSegment& g) {
    return g.weight.storage == op.segments.front().weight.storage;
  });
  GpuRmsNormSegment segments[kMaxNormSegments];
  const size_t count = std::min<size_t>(op.segments.size(), kMaxNormSegments);
  if (shared_weight && op.segments.size() <= static_cast<size_t>(kMaxRmsNormSegments)) {
    for (size_t i = 0; i < count; ++i)
      segments[i] = {op.segments[i].column, op.segments[i].dim, offset_of(op.segments[i].weight)};
    record_rms_norm_segments(*s.sequence, {buffer_of(op.x), offset_of(op.x), op.x.ld, op.rows,
                                           buffer_of(op.segments.front().weight), op.eps, buffer_of(op.y),
                                           offset_of(op.y), op.y.ld, std::span(segments, count)});
  } else {
    for (const NormSegment& g : op.segments)
      record_rms_norm(*s.sequence, {buffer_of(op.x), offset_of(op.x) + g.column, op.x.ld, op.rows, g.dim,
                                    buffer_of(g.weight), offset_of(g.weight), op.eps, buffer_of(op.y),
                                    offset_of(op.y) + g.column, op.y.ld});
  }
  s.mark(op.phase);
}

void VulkanBackend::causal_conv(Stream& stream, const CausalConvOp& op) const {
  VulkanStream& s = vk(stream);
  if (!recording_op(s)) return;
  GpuCausalConvArgs a;
  a.x = buffer_of(op.x);
  a.x_offset = offset_of(op.x);
  a.ldx = op.x.ld;
  a.channels = op.channels;
  a.kernel_size = op.kernel_size;
  a.weight = buffer_of(op.weight);
  a.weight_offset = offset_of(op.weight);
  a.bias = buffer_of(op.bias);
  a.bias_offset = offset_of(op.bias);
  a.history_offset = static_cast<uint64_t>(op.state_offset);
  a.y = buffer_of(op.y);
  a.y_offset = offset_of(op.y);
  a.ldy = op.y.ld;
  a.parts = op.parts;
  record_causal_conv_silu(*s.sequence, a);  // every sequence at once
  s.mark(op.phase);
}

void VulkanBackend::selective_scan(Stream& stream, const SelectiveScanOp& op) const {
  VulkanStream& s = vk(stream);
  if (!recording_op(s)) return;
  if (op.b.storage != op.c.storage || op.b.ld != op.c.ld)
    throw Error("vulkan selective_scan: B and C must be columns of one buffer");
  // The scan runs dt_proj itself in a decode-sized round when the matrix is one piece (as every
  // dt_proj is in practice: D x R is small) and dt_low shares B's buffer. That saves a dispatch
  // and a round trip of dt through memory per layer and step.
  const ScanDtProj* dt = op.dt_proj;
  const bool fused = dt != nullptr && dt->m < kMatmulTiledMinRows && matrix_of(dt->w).pieces.size() == 1 &&
                     !dtype_is_quantized(matrix_of(dt->w).dtype) && dt->bias &&
                     dt->dt_low.storage == op.b.storage && dt->dt_low.ld == op.b.ld;
  if (dt != nullptr && !fused) {
    record_product(*s.sequence, matrix_of(dt->w), dt->dt_low, dt->m, dt->bias, op.dt, false,
                   true);  // softplus, [m, R] -> [m, D]
    s.mark(dt->phase);
  }
  GpuSelectiveScanArgs a;
  a.channels = op.channels;
  a.d_state = op.d_state;
  a.u = buffer_of(op.u);
  a.u_offset = offset_of(op.u);
  a.ldu = op.u.ld;
  if (fused) {
    const DeviceMatrix& w = matrix_of(dt->w);
    a.fused_dt = GpuSelectiveScanFusedDt{
        w.pieces[0].buffer.get(), 0, w.dtype, w.cols, buffer_of(dt->bias), offset_of(dt->bias),
        offset_of(dt->dt_low)};
  } else {
    a.dt = buffer_of(op.dt);
    a.dt_offset = offset_of(op.dt);
    a.lddt = op.dt.ld;
  }
  a.bc = buffer_of(op.b);
  a.b_offset = offset_of(op.b);
  a.c_offset = offset_of(op.c);
  a.ldbc = op.b.ld;
  a.z = buffer_of(op.z);
  a.z_offset = offset_of(op.z);
  a.ldz = op.z.ld;
  a.a_base2 = buffer_of(op.a_base2);
  a.a_offset = offset_of(op.a_base2);
  a.d_skip = buffer_of(op.d_skip);
  a.d_offset = offset_of(op.d_skip);
  a.state_offset = static_cast<uint64_t>(op.state_offset);
  a.y = buffer_of(op.y);
  a.y_offset = offset_of(op.y);
  a.ldy = op.y.ld;
  a.parts = op.parts;
  record_selective_scan(*s.sequence, a);  // every sequence at once, with dt_proj when fused
  s.mark(op.phase);
}

void VulkanBackend::mamba2_scan(Stream& stream, const Mamba2ScanOp& op) const {
  VulkanStream& s = vk(stream);
  if (!recording_op(s)) return;
  GpuMamba2ScanArgs a;
  a.n_heads = op.n_heads;
  a.headdim = op.headdim;
  a.d_state = op.d_state;
  a.n_groups = op.n_groups;
  a.xbc = buffer_of(op.xbc);
  a.xbc_offset = offset_of(op.xbc);
  a.ldxbc = op.xbc.ld;
  a.dt = buffer_of(op.dt);
  a.dt_offset = offset_of(op.dt);
  a.lddt = op.dt.ld;
  a.y = buffer_of(op.y);
  a.y_offset = offset_of(op.y);
  a.ldy = op.y.ld;
  a.dt_bias = buffer_of(op.dt_bias);
  a.dt_bias_offset = offset_of(op.dt_bias);
  a.a_base2 = buffer_of(op.a_base2);
  a.a_base2_offset = offset_of(op.a_base2);
  a.a = buffer_of(op.a);
  a.a_offset = offset_of(op.a);
  a.d_skip = buffer_of(op.d_skip);
  a.d_offset = offset_of(op.d_skip);
  a.d_per_channel = op.d_skip_per_channel;
  a.dt_min = op.dt_min;
  a.dt_max = op.dt_max;
  a.state_offset = static_cast<uint64_t>(op.state_offset);
  a.parts = op.parts;
  // As on the CPU: Auto takes the sequential order, and a chunk never exceeds the round's
  // longest part (CpuBackend's ssd_chunk_for), so both devices cut the same chunks.
  a.chunked = op.form == ScanForm::Chunked;
  a.chunk = ssd_chunk_for(op.chunk, op.parts);
  record_mamba2_scan(*s.sequence, a);  // every sequence at once
  s.mark(op.phase);
}

void VulkanBackend::attention(Stream&, const AttentionOp&) const {
  throw Error(why_unsupported({OpKind::Attention}));
}

void VulkanBackend::rope(Stream&, const RopeOp&) const {
  throw Error(why_unsupported({OpKind::Rope}));
}

void VulkanBackend::glu(Stream&, const GluOp&) const {
  throw Error(why_unsupported({OpKind::Glu}));
}

void VulkanBackend::scale(Stream&, const ScaleOp&) const {
  throw Error(why_unsupported({OpKind::Scale}));
}

void VulkanBackend::moe(Stream&, const MoeOp&) const {
  throw Error(why_unsupported({OpKind::Moe}));
}

void VulkanBackend::short_conv(Stream&, const ShortConvOp&) const {
  throw Error(why_unsupported({OpKind::ShortConv}));
}

void VulkanBackend::gated_delta_net(Stream&, const GatedDeltaNetOp&) const {
  throw Error(why_unsupported({OpKind::GatedDeltaNet}));
}

void VulkanBackend::gated_rms_norm(Stream& stream, const GatedRmsNormOp& op) const {
  VulkanStream& s = vk(stream);
  if (!recording_op(s)) return;
  record_gated_rms_norm(*s.sequence,
                        {buffer_of(op.y), offset_of(op.y), op.y.ld, buffer_of(op.z), offset_of(op.z), op.z.ld,
                         op.rows, op.dim, op.group_size, buffer_of(op.weight), offset_of(op.weight), op.eps,
                         buffer_of(op.out), offset_of(op.out), op.out.ld});
  s.mark(op.phase);
}

void VulkanBackend::mamba3_scan(Stream& stream, const Mamba3ScanOp& op) const {
  VulkanStream& s = vk(stream);
  if (!recording_op(s)) return;
  GpuMamba3ScanArgs a;
  a.n_heads = op.n_heads;
  a.headdim = op.headdim;
  a.d_state = op.d_state;
  a.n_groups = op.n_groups;
  a.n_angles = op.n_angles;
  a.proj = buffer_of(op.proj);
  a.proj_offset = offset_of(op.proj);
  a.ldp = op.proj.ld;
  a.y = buffer_of(op.y);
  a.y_offset = offset_of(op.y);
  a.ldy = op.y.ld;
  a.dt_bias = buffer_of(op.dt_bias);
  a.dt_bias_offset = offset_of(op.dt_bias);
  a.b_bias = buffer_of(op.b_bias);
  a.b_bias_offset = offset_of(op.b_bias);
  a.c_bias = buffer_of(op.c_bias);
  a.c_bias_offset = offset_of(op.c_bias);
  a.b_norm = buffer_of(op.b_norm);
  a.b_norm_offset = offset_of(op.b_norm);
  a.c_norm = buffer_of(op.c_norm);
  a.c_norm_offset = offset_of(op.c_norm);
  a.d_skip = buffer_of(op.d_skip);
  a.d_offset = offset_of(op.d_skip);
  a.gate_norm = buffer_of(op.gate_norm);
  a.gate_offset = offset_of(op.gate_norm);
  a.a_floor = op.a_floor;
  a.eps = op.eps;
  a.state_offset = static_cast<uint64_t>(op.state_offset);
  a.parts = op.parts;
  // Each part's order as the CPU backend picks it (auto: its measured crossover, by the part's own
  // rows), so --scan means the same on both devices and gives the same bits.
  std::vector<uint8_t> chunked(op.parts.size());
  for (size_t i = 0; i < op.parts.size(); ++i)
    chunked[i] =
        op.form == ScanForm::Chunked ||
        (op.form == ScanForm::Auto && CpuBackend::mamba3_prefers_chunked(op.parts[i].rows, op.chunk));
  a.chunked = chunked;
  a.chunk = ssd_chunk_for(op.chunk, op.parts);
  a.boundary_fold = op.boundary_fold;
  record_mamba3_scan(*s.sequence, a);  // every sequence at once
  s.mark(op.phase);
}

void VulkanBackend::embed(Stream& stream, const EmbedOp& op) const {
  VulkanStream& s = vk(stream);
  const bool record = recording_op(s);
  const int64_t rows = static_cast<int64_t>(op.tokens.size());
  if (rows == 0) return;
  // The rows are gathered on the host (the CPU's own lookup, so the same floats) into a
  // host-visible twin of y's buffer, which the recording copies from.
  Buffer& staging = s.staging_for(op.y.storage);
  float* to = static_cast<float*>(staging.mapped()) + op.y.offset;
  const size_t row_bytes = dtype_row_bytes(op.dtype, op.cols);
  for (int64_t t = 0; t < rows; ++t)
    dequantize_row(op.dtype, op.table + op.tokens[t] * row_bytes, op.cols, to + t * op.y.ld);
  if (!record) return;
  copy_rows(*s.sequence, staging, op.y, rows, op.cols, "embed");
  s.mark(op.phase);
}

void VulkanBackend::write_rows(Stream& stream, const WriteRowsOp& op) const {
  VulkanStream& s = vk(stream);
  const bool record = recording_op(s);
  if (op.rows == 0) return;
  Buffer& staging = s.staging_for(op.y.storage);
  float* to = static_cast<float*>(staging.mapped()) + op.y.offset;
  for (int64_t r = 0; r < op.rows; ++r)
    std::memcpy(to + r * op.y.ld, op.host + r * op.cols, float_bytes(op.cols));
  if (!record) return;
  copy_rows(*s.sequence, staging, op.y, op.rows, op.cols, "rows");
  s.mark(op.phase);
}

void VulkanBackend::argmax(Stream& stream, const ArgmaxOp& op) const {
  VulkanStream& s = vk(stream);
  if (!recording_op(s)) return;
  record_argmax(*s.sequence, {buffer_of(op.x), offset_of(op.x), op.x.ld, op.rows, op.cols, buffer_of(op.y),
                              offset_of(op.y)});
  s.mark(op.phase);
}

void VulkanBackend::append_rows(Stream& stream, const AppendRowsOp& op) const {
  VulkanStream& s = vk(stream);
  if (!recording_op(s)) return;
  // One copy per part (per row where x's rows are not contiguous).
  for (const Part& part : op.parts) {
    const Buffer* to = static_cast<const VulkanState*>(part.state)->growing(static_cast<size_t>(op.part));
    MB_CHECK(part.position + part.rows <= part.state->capacity());
    const bool contiguous = op.x.ld == op.cols;
    const int64_t runs = contiguous ? 1 : part.rows, rows_per_run = contiguous ? part.rows : 1;
    for (int64_t run = 0; run < runs; ++run) {
      const int64_t row = run * rows_per_run;
      s.sequence->copy(*buffer_of(op.x), float_bytes(op.x.row(part.first_row + row).offset), *to,
                       float_bytes((part.position + row) * op.cols), float_bytes(rows_per_run * op.cols),
                       "append_rows");
    }
  }
  s.mark(op.phase);
}

}  // namespace mb::vulkan

#include "model/vulkan/vulkan_mamba1.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "backends/vulkan/vulkan_commands.h"
#include "backends/vulkan/vulkan_ops.h"
#include "core/error.h"
#include "io/safetensors.h"
#include "ops/quant.h"

namespace mb {

using vulkan::Buffer;
using vulkan::CommandSequence;

struct VulkanMamba1::Layer {
  BufferPtr norm, in_proj_bias, conv_weight, conv_bias, dt_bias, a_base2, d_skip, out_proj_bias;
  DeviceMatrix in_proj, x_proj, dt_proj, out_proj;
};

// One round: which rows of the round's buffers belong to which sequence (as in model.cc).
struct VulkanMamba1::Round {
  struct Part {
    int64_t sequence;   // index into the batch
    Buffer* state;      // that sequence's device state
    uint64_t state_id;  // VulkanMamba1::State::id, for the replay key
    int64_t begin, count;
    int64_t start;  // positions of the sequence consumed before this round
    bool last;      // the sequence's final round
    bool tokens;    // token ids (else feature rows)
  };
  std::vector<Part> parts;
  int64_t m = 0;
  int64_t finishing = 0;  // sequences whose last round this is
};

// A sequence's state in a device buffer, laid out as SequenceState::values. It keeps the
// context alive, so a state may outlive the model that advanced it and still be read.
class VulkanMamba1::State final : public DeviceState {
 public:
  State(std::shared_ptr<Shared> shared, std::span<const float> values)
      : shared_(std::move(shared)),
        buffer_(shared_->context, values.size_bytes()),
        id_(++shared_->states_made) {
    buffer_.upload(values.data(), values.size_bytes());
  }
  void download(std::span<float> values) const override {
    const std::lock_guard lock(shared_->mutex);
    buffer_.download(values.data(), std::min<uint64_t>(values.size_bytes(), buffer_.bytes()));
  }
  const Shared* shared() const { return shared_.get(); }
  Buffer& buffer() { return buffer_; }
  // Unique among the states of one context. A recording names its states by id, not by buffer
  // handle: a freed buffer's handle may come back for a new state, which must not replay
  // descriptors that named the old one.
  uint64_t id() const { return id_; }

 private:
  std::shared_ptr<Shared> shared_;
  Buffer buffer_;
  uint64_t id_;
};

// A caller's activations, I/O buffers and last recording. Buffers grow to the largest round
// seen; any reallocation invalidates the recording, whose descriptors name the old buffers.
class VulkanMamba1::Scratch final : public DeviceWorkspace {
 public:
  explicit Scratch(std::shared_ptr<Shared> shared) : shared(std::move(shared)) {}

  std::shared_ptr<Shared> shared;  // declared first: destroyed after every buffer
  int64_t rows = 0;
  uint64_t out_floats = 0, logits_floats = 0;
  // `logits` holds ArgmaxLast's logits on the device; only the chosen ids reach `out`.
  BufferPtr tokens_in, features_in, hidden, xz, u, xdbl, dt, y, normed, out, logits;
  std::unique_ptr<CommandSequence> sequence;
  uint32_t sequence_capacity = 0;
  bool recorded = false;
  std::vector<uint64_t> recorded_key;
  std::vector<std::string> phases;  // the phase of each dispatch of the recording
  std::vector<DevicePhaseTime> timings;
  int64_t recordings = 0;
  std::vector<int64_t> consumed;
  std::vector<double> pooled;
};

namespace {

void accumulate_time(std::vector<DevicePhaseTime>& times, const std::string& phase, double ms) {
  for (DevicePhaseTime& time : times) {
    if (time.phase != phase) continue;
    time.milliseconds += ms;
    ++time.dispatches;
    return;
  }
  times.push_back({phase, ms, 1});
}

// The model, checked before any device is opened: the upload reads its host matrices.
const Mamba1Model& with_host_matrices(const Mamba1Model& model) {
  if (!model.has_host_matrices())
    throw Error("the model's host weights were dropped after an upload; load it again to upload it here");
  return model;
}

}  // namespace

VulkanMamba1::VulkanMamba1(const Mamba1Model& model, const vulkan::ContextOptions& options,
                           uint64_t max_piece_bytes)
    : model_(with_host_matrices(model)), shared_(std::make_shared<Shared>(options)) {
  max_piece_bytes_ = shared_->context.info().max_storage_buffer_bytes;
  if (max_piece_bytes > 0) max_piece_bytes_ = std::min(max_piece_bytes_, max_piece_bytes);
  const ModelConfig& c = model.config();
  for (const WeightMatrix* matrix : {&model.lm_head(), &model.input_proj()}) {
    if (matrix->data != nullptr && matrix->dtype != DType::F32 && matrix->dtype != DType::BF16 &&
        matrix->dtype != DType::F16)
      throw Error("the Vulkan backend computes with f32, bf16 or f16 weights, not " +
                  std::string(dtype_name(matrix->dtype)) + " (load with --dtype f32, bf16 or f16)");
  }
  if (c.d_state > kMaxStateSize) throw Error("the Vulkan scan supports d_state up to 256");
  const int64_t d = c.d_model, D = c.d_inner, N = c.d_state, K = c.d_conv;
  layers_.resize(c.n_layer);
  for (int64_t l = 0; l < c.n_layer; ++l) {
    const Mamba1Layer& src = model.layers()[l];
    Layer& layer = layers_[l];
    layer.norm = upload_floats(src.norm, d);
    layer.in_proj = upload_matrix(src.in_proj);
    layer.in_proj_bias = upload_floats(src.in_proj_bias, 2 * D);
    layer.conv_weight = upload_floats(src.conv_weight, K * D);
    layer.conv_bias = upload_floats(src.conv_bias, D);
    layer.x_proj = upload_matrix(src.x_proj);
    layer.dt_proj = upload_matrix(src.dt_proj);
    layer.dt_bias = upload_floats(src.dt_bias, D);
    layer.a_base2 = upload_floats(src.a_base2, N * D);
    layer.d_skip = upload_floats(src.d_skip, D);
    layer.out_proj = upload_matrix(src.out_proj);
    layer.out_proj_bias = upload_floats(src.out_proj_bias, d);
  }
  lm_head_ = upload_matrix(model.lm_head());
  norm_f_ = upload_floats(model.norm_f(), d);
  input_proj_ = upload_matrix(model.input_proj());
  input_proj_bias_ = upload_floats(model.input_proj_bias(), d);
  mixer_norm_ones_ = upload_floats(model.mixer_norm_ones(), std::max(c.dt_rank, N));
}

VulkanMamba1::~VulkanMamba1() = default;

VulkanMamba1::BufferPtr VulkanMamba1::upload_floats(const float* values, int64_t count) const {
  if (values == nullptr) return nullptr;
  auto buffer = std::make_unique<Buffer>(shared_->context, count * sizeof(float));
  buffer->upload(values, count * sizeof(float));
  return buffer;
}

VulkanMamba1::DeviceMatrix VulkanMamba1::upload_matrix(const WeightMatrix& matrix) const {
  DeviceMatrix uploaded;
  if (matrix.data == nullptr) return uploaded;
  if (matrix.dtype != DType::F32 && matrix.dtype != DType::BF16 && matrix.dtype != DType::F16)
    throw Error("the Vulkan backend computes with f32, bf16 or f16 weights, not " +
                std::string(dtype_name(matrix.dtype)) + " (load with --dtype f32, bf16 or f16)");
  uploaded.dtype = matrix.dtype;
  uploaded.cols = matrix.cols;
  // The packed panels exactly as the CPU kernels read them, [panels][cols][64] in the dtype, cut
  // into runs of whole panels that one storage binding can span. Each output's chain lives in
  // one panel, so the cut changes no bit.
  const uint64_t panel_bytes =
      static_cast<uint64_t>(matrix.cols * kPanelWidth) * (matrix.dtype == DType::F32 ? 4 : 2);
  const uint64_t limit = max_piece_bytes_;
  if (panel_bytes > limit)
    throw Error("one 64-row panel of a " + std::to_string(matrix.cols) +
                "-column matrix exceeds what a storage " + "binding may span on " +
                shared_->context.info().name);
  const int64_t panels_per_piece = static_cast<int64_t>(limit / panel_bytes);
  for (int64_t panel = 0; panel < matrix.panels(); panel += panels_per_piece) {
    const int64_t panels = std::min(panels_per_piece, matrix.panels() - panel);
    DeviceMatrix::Piece piece;
    piece.first_row = panel * kPanelWidth;
    piece.rows = std::min(panels * kPanelWidth, matrix.rows - piece.first_row);
    piece.buffer = std::make_unique<Buffer>(shared_->context, panels * panel_bytes);
    piece.buffer->upload(static_cast<const uint8_t*>(matrix.data) + panel * panel_bytes,
                         panels * panel_bytes);
    uploaded.pieces.push_back(std::move(piece));
  }
  return uploaded;
}

void VulkanMamba1::record_product(vulkan::CommandSequence& seq, const DeviceMatrix& w, const Buffer* x,
                                  int64_t x_offset, int64_t ldx, int64_t m, const Buffer* bias,
                                  const Buffer* y, int64_t y_offset, int64_t ldy, bool accumulate,
                                  bool softplus, const Buffer* norm, float norm_eps) {
  for (const DeviceMatrix::Piece& piece : w.pieces) {
    vulkan::record_matmul(
        seq,
        {x, static_cast<uint64_t>(x_offset), ldx, m, piece.buffer.get(), 0, w.dtype, piece.rows, w.cols, bias,
         static_cast<uint64_t>(bias != nullptr ? piece.first_row : 0), y,
         static_cast<uint64_t>(y_offset + piece.first_row), ldy, accumulate, softplus, norm, 0, norm_eps});
  }
}

std::string VulkanMamba1::description() const {
  const vulkan::DeviceInfo& info = shared_->context.info();
  return "vulkan:" + std::to_string(info.index) + " (" + info.name + ", " + info.driver + ")";
}

VulkanMamba1::Scratch& VulkanMamba1::scratch_of(Workspace& workspace) const {
  auto* scratch = dynamic_cast<Scratch*>(workspace.device.get());
  if (scratch == nullptr || scratch->shared != shared_) {
    workspace.device = std::make_unique<Scratch>(shared_);
    scratch = static_cast<Scratch*>(workspace.device.get());
  }
  return *scratch;
}

VulkanMamba1::State& VulkanMamba1::device_state(SequenceState& state) const {
  auto* held = dynamic_cast<State*>(state.device.get());
  if (held != nullptr && held->shared() == shared_.get()) return *held;
  // A state from the host, or from another device, moves here once and then stays.
  if (state.device) {
    state.device->download(state.values);
    state.device.reset();
  }
  auto created = std::make_unique<State>(shared_, state.values);
  State& made = *created;
  state.device = std::move(created);
  return made;
}

std::vector<std::string> VulkanMamba1::recorded_phases(const Workspace& workspace) const {
  const auto* scratch = dynamic_cast<const Scratch*>(workspace.device.get());
  return scratch != nullptr ? scratch->phases : std::vector<std::string>{};
}

int64_t VulkanMamba1::recordings(const Workspace& workspace) const {
  const auto* scratch = dynamic_cast<const Scratch*>(workspace.device.get());
  return scratch != nullptr ? scratch->recordings : 0;
}

std::vector<DevicePhaseTime> VulkanMamba1::last_timings(const Workspace& workspace) const {
  const auto* scratch = dynamic_cast<const Scratch*>(workspace.device.get());
  return scratch != nullptr ? scratch->timings : std::vector<DevicePhaseTime>{};
}

// The scan runs dt_proj itself (GpuSelectiveScanFusedDt) in a decode-sized round of `m` rows
// when the matrix is one piece, as every dt_proj is in practice (D x R is small), with its bias
// (Mamba-1 always has one). That saves a dispatch and a round trip of dt through memory per
// layer and step. A prefill round keeps dt_proj's own GEMM: there the tiled shader computes dt
// in parallel over every row, where the scan would add R sequential multiply-adds per position to
// its own sequential walk over time. Both give the same bits.
bool VulkanMamba1::fused_dt_proj(const Layer& layer, int64_t m) {
  return m < vulkan::kMatmulTiledMinRows && layer.dt_proj.pieces.size() == 1 && layer.dt_bias != nullptr;
}

void VulkanMamba1::record_round(Scratch& s, const Round& round, const ForwardOptions& options) const {
  const ModelConfig& c = model_.config();
  const int64_t d = c.d_model, D = c.d_inner, N = c.d_state, R = c.dt_rank, K = c.d_conv;
  const int64_t xw = R + 2 * N, m = round.m, vocab = c.vocab_size;
  // The device state has the host layout (the model's StateLayout): per layer, conv history
  // [K-1, D] then SSM state [N, D].
  const StateLayout& layout = model_.state_layout();
  const int64_t parts = static_cast<int64_t>(round.parts.size());
  // An upper bound on the dispatches: per layer a norm, FalconMamba's mixer norm, a dispatch per
  // matrix piece (none for a dt_proj the scan runs), and a conv and a scan per sequence (the
  // bound of a device without buffer arrays; with them, one each per 16 sequences); around the
  // layers an input op per sequence (a copy or the input projection's pieces), a final norm per
  // sequence, the LM head's pieces and the argmax.
  int64_t layer_pieces = 0;
  for (const Layer& layer : layers_)
    layer_pieces += static_cast<int64_t>(layer.in_proj.pieces.size() + layer.x_proj.pieces.size() +
                                         (fused_dt_proj(layer, m) ? 0 : layer.dt_proj.pieces.size()) +
                                         layer.out_proj.pieces.size());
  const int64_t input_ops = parts * std::max<int64_t>(1, static_cast<int64_t>(input_proj_.pieces.size()));
  const uint32_t needed = static_cast<uint32_t>(layer_pieces + c.n_layer * (2 + 2 * parts) + input_ops +
                                                parts + static_cast<int64_t>(lm_head_.pieces.size()) + 1);
  if (!s.sequence || s.sequence_capacity < needed) {
    s.sequence.reset();
    s.sequence = std::make_unique<CommandSequence>(shared_->context, needed);
    s.sequence_capacity = needed;
  }
  CommandSequence& seq = *s.sequence;
  seq.begin();
  s.phases.clear();
  auto mark = [&](const char* phase) {
    while (s.phases.size() < seq.dispatch_count()) s.phases.emplace_back(phase);
  };

  // Embedding rows: one copy per run of token sequences (their rows are adjacent in the round).
  for (size_t p = 0; p < round.parts.size(); ++p) {
    const Round::Part& part = round.parts[p];
    if (part.tokens) {
      size_t end = p + 1;
      while (end < round.parts.size() && round.parts[end].tokens) ++end;
      const Round::Part& last = round.parts[end - 1];
      const uint64_t rows = static_cast<uint64_t>(last.begin + last.count - part.begin);
      seq.copy(*s.tokens_in, part.begin * d * 4, *s.hidden, part.begin * d * 4, rows * d * 4, "embed");
      mark("embed");
      p = end - 1;
    } else {
      const int64_t in_dim = input_proj_.cols;
      record_product(seq, input_proj_, s.features_in.get(), part.begin * in_dim, in_dim, part.count,
                     input_proj_bias_.get(), s.hidden.get(), part.begin * d, d, false,
                     false);  // -> [count, d]
      mark("input_proj");
    }
  }

  // The conv and the scan take every sequence of the round in one dispatch, each part with its
  // rows and its own state buffer.
  std::vector<vulkan::GpuPart> gpu_parts;
  for (const Round::Part& part : round.parts) gpu_parts.push_back({part.state, part.begin, part.count});
  for (int64_t l = 0; l < c.n_layer; ++l) {
    const Layer& layer = layers_[l];
    const bool fused_dt = fused_dt_proj(layer, m);
    const auto history_at = static_cast<uint64_t>(layout.offset(l, Mamba1Model::kConvPart));
    const auto ssm_at = static_cast<uint64_t>(layout.offset(l, Mamba1Model::kSsmPart));
    // The layer norm runs inside in_proj's dispatches: rms_norm(hidden) never reaches memory.
    record_product(seq, layer.in_proj, s.hidden.get(), 0, d, m, layer.in_proj_bias.get(), s.xz.get(), 0,
                   2 * D, false, false, layer.norm.get(),
                   static_cast<float>(c.norm_eps));  // rms_norm([m, d]) x [2D, d]^T -> [m, 2D]
    mark("in_proj");
    vulkan::GpuCausalConvArgs conv;
    conv.x = s.xz.get();
    conv.ldx = 2 * D;
    conv.channels = D;
    conv.kernel_size = static_cast<int>(K);
    conv.weight = layer.conv_weight.get();
    conv.bias = layer.conv_bias.get();
    conv.history_offset = history_at;
    conv.y = s.u.get();
    conv.ldy = D;
    conv.parts = gpu_parts;
    vulkan::record_causal_conv_silu(seq, conv);  // x half of xz -> u [m, D], every sequence at once
    mark("conv");
    record_product(seq, layer.x_proj, s.u.get(), 0, D, m, nullptr, s.xdbl.get(), 0, xw, false,
                   false);  // [m, D] -> [m, R + 2N]
    mark("x_proj");
    if (c.mixer_rms_norm) {
      // FalconMamba normalizes dt_low, B and C each over its own width, in place, per row: one
      // dispatch with a segment each.
      const vulkan::GpuRmsNormSegment pieces[] = {
          {0, R, 0}, {R, N, 0}, {R + N, N, 0}};  // (column, width, weights)
      vulkan::record_rms_norm_segments(
          seq, {s.xdbl.get(), 0, xw, m, mixer_norm_ones_.get(), static_cast<float>(c.mixer_rms_eps),
                s.xdbl.get(), 0, xw, pieces});  // [m, R + 2N] in place
      mark("norm");
    }
    vulkan::GpuSelectiveScanArgs scan;
    if (fused_dt) {
      // The scan computes dt = softplus(dt_low W_dt^T + dt_bias) itself, with dt_proj's bits.
      scan.fused_dt = vulkan::GpuSelectiveScanFusedDt{
          layer.dt_proj.pieces[0].buffer.get(), 0, layer.dt_proj.dtype, R, layer.dt_bias.get(), 0, 0};
    } else {
      record_product(seq, layer.dt_proj, s.xdbl.get(), 0, xw, m, layer.dt_bias.get(), s.dt.get(), 0, D, false,
                     true);  // softplus, [m, R] -> [m, D]
      mark("dt_proj");
      scan.dt = s.dt.get();
      scan.lddt = D;
    }
    scan.channels = D;
    scan.d_state = N;
    scan.u = s.u.get();
    scan.ldu = D;
    scan.bc = s.xdbl.get();
    scan.b_offset = R;
    scan.c_offset = R + N;
    scan.ldbc = xw;
    scan.z = s.xz.get();
    scan.z_offset = D;
    scan.ldz = 2 * D;
    scan.a_base2 = layer.a_base2.get();
    scan.d_skip = layer.d_skip.get();
    scan.state_offset = ssm_at;
    scan.y = s.y.get();
    scan.ldy = D;
    scan.parts = gpu_parts;
    vulkan::record_selective_scan(seq, scan);  // -> gated y [m, D], every sequence at once
    mark("scan");                              // with dt_proj, when fused
    record_product(seq, layer.out_proj, s.y.get(), 0, D, m, layer.out_proj_bias.get(), s.hidden.get(), 0, d,
                   true, false);  // residual += [m, D] -> [m, d]
    mark("out_proj");
  }

  // Outputs, as model.cc computes them: norm_f per row (row results do not depend on which rows
  // share a dispatch), then the LM head over the rows that need logits.
  const float eps = static_cast<float>(c.norm_eps);
  auto norm_rows = [&](int64_t from, int64_t rows, Buffer* to, int64_t to_row) {
    vulkan::record_rms_norm(seq, {s.hidden.get(), static_cast<uint64_t>(from * d), d, rows, d, norm_f_.get(),
                                  0, eps, to, static_cast<uint64_t>(to_row * d), d});
  };
  switch (options.output) {
    case OutputKind::None:
      break;
    case OutputKind::LogitsLast:
    case OutputKind::ArgmaxLast:
    case OutputKind::HiddenLast: {
      // The last row of each finishing sequence goes to the next slot; runs of adjacent rows (every
      // row of a decode step) take one dispatch.
      int64_t slot = 0, run_from = -1, run_rows = 0;
      Buffer* to = options.output == OutputKind::HiddenLast ? s.out.get() : s.normed.get();
      for (const Round::Part& part : round.parts) {
        if (!part.last) continue;
        const int64_t row = part.begin + part.count - 1;
        if (run_rows > 0 && row == run_from + run_rows) {
          ++run_rows;
        } else {
          if (run_rows > 0) norm_rows(run_from, run_rows, to, slot - run_rows);
          run_from = row;
          run_rows = 1;
        }
        ++slot;
      }
      if (run_rows > 0) norm_rows(run_from, run_rows, to, slot - run_rows);
      mark("final_norm");
      if (options.output != OutputKind::HiddenLast && slot > 0) {
        const bool argmax = options.output == OutputKind::ArgmaxLast;
        record_product(seq, lm_head_, s.normed.get(), 0, d, slot, nullptr,
                       argmax ? s.logits.get() : s.out.get(), 0, vocab, false,
                       false);  // [finishing, d] -> [finishing, vocab]
        mark("lm_head");
        if (argmax) {
          vulkan::record_argmax(seq,
                                {s.logits.get(), 0, vocab, slot, vocab, s.out.get(), 0});  // -> [finishing]
          mark("argmax");
        }
      }
      break;
    }
    case OutputKind::HiddenAll:
    case OutputKind::HiddenMean:
      norm_rows(0, m, s.out.get(), 0);
      mark("final_norm");
      break;
    case OutputKind::LogitsAll:
      norm_rows(0, m, s.normed.get(), 0);
      mark("final_norm");
      record_product(seq, lm_head_, s.normed.get(), 0, d, m, nullptr, s.out.get(), 0, vocab, false,
                     false);  // [m, d] -> [m, vocab]
      mark("lm_head");
      break;
  }
  seq.end();
}

void VulkanMamba1::forward(std::span<const SequenceInput> batch, std::span<const int64_t> totals,
                           const ForwardOptions& options, Workspace& workspace,
                           std::vector<std::vector<float>>& outputs) const {
  const ModelConfig& c = model_.config();
  const int64_t d = c.d_model, D = c.d_inner, xdbl_width = c.dt_rank + 2 * c.d_state;
  const int64_t n_seq = static_cast<int64_t>(batch.size());
  const std::lock_guard lock(shared_->mutex);
  std::vector<State*> states(n_seq);
  for (int64_t i = 0; i < n_seq; ++i) states[i] = &device_state(*batch[i].state);
  Scratch& s = scratch_of(workspace);
  s.timings.clear();
  outputs.resize(n_seq);
  for (auto& out : outputs) out.clear();
  s.consumed.assign(n_seq, 0);
  if (options.output == OutputKind::HiddenMean) s.pooled.assign(n_seq * d, 0.0);
  const int64_t in_dim = model_.input_dim();

  Round round;
  for (;;) {
    round.parts.clear();
    round.m = 0;
    round.finishing = 0;
    for (int64_t i = 0; i < n_seq; ++i) {
      const int64_t left = totals[i] - s.consumed[i];
      if (left == 0) continue;
      const int64_t count = options.chunk > 0 && options.chunk < left ? options.chunk : left;
      const bool last = count == left;
      round.parts.push_back({i, &states[i]->buffer(), states[i]->id(), round.m, count, s.consumed[i], last,
                             !batch[i].tokens.empty()});
      round.m += count;
      round.finishing += last;
    }
    if (round.parts.empty()) break;
    const int64_t m = round.m;

    // Grow the scratch to this round; every buffer of a round is [m, width] floats.
    if (m > s.rows) {
      auto rows_of = [&](int64_t width, vulkan::Memory memory = vulkan::Memory::DeviceLocal) {
        return std::make_unique<Buffer>(shared_->context, static_cast<uint64_t>(m * width) * 4, memory);
      };
      s.tokens_in = rows_of(d, vulkan::Memory::HostVisible);
      if (in_dim > 0) s.features_in = rows_of(in_dim, vulkan::Memory::HostVisible);
      s.hidden = rows_of(d);
      s.xz = rows_of(2 * D);
      s.u = rows_of(D);
      s.xdbl = rows_of(xdbl_width);
      const bool dt_read = std::any_of(layers_.begin(), layers_.end(),
                                       [m](const Layer& layer) { return !fused_dt_proj(layer, m); });
      s.dt = dt_read ? rows_of(D) : nullptr;  // written by a dt_proj the scan does not run
      s.y = rows_of(D);
      s.normed = rows_of(d);
      s.rows = m;
      s.recorded = false;
    }
    uint64_t out_floats = 0;
    switch (options.output) {
      case OutputKind::None:
        break;
      case OutputKind::LogitsLast:
        out_floats = round.finishing * c.vocab_size;
        break;
      case OutputKind::ArgmaxLast:
        out_floats = round.finishing;
        break;
      case OutputKind::HiddenLast:
        out_floats = round.finishing * d;
        break;
      case OutputKind::LogitsAll:
        out_floats = m * c.vocab_size;
        break;
      case OutputKind::HiddenAll:
      case OutputKind::HiddenMean:
        out_floats = m * d;
        break;
    }
    if (out_floats > s.out_floats || !s.out) {
      s.out = std::make_unique<Buffer>(shared_->context, std::max<uint64_t>(out_floats, 1) * 4,
                                       vulkan::Memory::HostVisible);
      s.out_floats = std::max<uint64_t>(out_floats, 1);
      s.recorded = false;
    }
    const uint64_t logits_floats =
        options.output == OutputKind::ArgmaxLast ? static_cast<uint64_t>(round.finishing * c.vocab_size) : 0;
    if (logits_floats > s.logits_floats) {
      s.logits = std::make_unique<Buffer>(shared_->context, logits_floats * 4);
      s.logits_floats = logits_floats;
      s.recorded = false;
    }

    // The round's inputs: embedding rows gathered on the host (the CPU's own lookup, so the
    // same floats), feature rows as given.
    auto* tokens_in = static_cast<float*>(s.tokens_in->mapped());
    for (const Round::Part& part : round.parts) {
      const SequenceInput& in = batch[part.sequence];
      if (part.tokens) {
        const StoredTensor& embedding = model_.embedding();
        const DType dtype = *embedding.dtype;
        const size_t row_bytes = dtype_row_bytes(dtype, d);
        for (int64_t t = 0; t < part.count; ++t)
          dequantize_row(dtype, embedding.data + in.tokens[part.start + t] * row_bytes, d,
                         tokens_in + (part.begin + t) * d);
      } else {
        std::memcpy(static_cast<float*>(s.features_in->mapped()) + part.begin * in_dim,
                    in.features.data() + part.start * in_dim, part.count * in_dim * sizeof(float));
      }
    }
    s.tokens_in->flush();
    if (s.features_in) s.features_in->flush();

    // Replay the last recording when this round has its shape; record otherwise.
    std::vector<uint64_t> key = {static_cast<uint64_t>(m), static_cast<uint64_t>(options.output)};
    for (const Round::Part& part : round.parts) {
      key.insert(key.end(),
                 {part.state_id, static_cast<uint64_t>(part.begin), static_cast<uint64_t>(part.count),
                  static_cast<uint64_t>(part.last), static_cast<uint64_t>(part.tokens)});
    }
    if (!s.recorded || key != s.recorded_key) {
      s.recorded = false;
      record_round(s, round, options);
      s.recorded_key = std::move(key);
      s.recorded = true;
      ++s.recordings;
    }
    s.sequence->run();
    const std::vector<vulkan::DispatchTime> times = s.sequence->last_timings();
    for (size_t i = 0; i < times.size() && i < s.phases.size(); ++i)
      accumulate_time(s.timings, s.phases[i], times[i].milliseconds);

    // Outputs, copied out of the host-visible buffer as the CPU path lays them out.
    s.out->invalidate();
    const float* out = static_cast<const float*>(s.out->mapped());
    int64_t slot = 0;
    for (const Round::Part& part : round.parts) {
      std::vector<float>& dest = outputs[part.sequence];
      switch (options.output) {
        case OutputKind::None:
          break;
        case OutputKind::LogitsLast:
        case OutputKind::ArgmaxLast:
        case OutputKind::HiddenLast: {
          if (!part.last) break;
          const int64_t width = model_.output_width(options.output);
          dest.assign(out + slot * width, out + (slot + 1) * width);
          ++slot;
          break;
        }
        case OutputKind::LogitsAll:
          dest.insert(dest.end(), out + part.begin * c.vocab_size,
                      out + (part.begin + part.count) * c.vocab_size);
          break;
        case OutputKind::HiddenAll:
          dest.insert(dest.end(), out + part.begin * d, out + (part.begin + part.count) * d);
          break;
        case OutputKind::HiddenMean: {
          // Summed on the host in double, in the CPU path's order.
          double* sum = s.pooled.data() + part.sequence * d;
          for (int64_t t = 0; t < part.count; ++t)
            for (int64_t k = 0; k < d; ++k) sum[k] += out[(part.begin + t) * d + k];
          if (part.last) {
            dest.resize(d);
            for (int64_t k = 0; k < d; ++k) dest[k] = static_cast<float>(sum[k] / totals[part.sequence]);
          }
          break;
        }
      }
    }
    for (const Round::Part& part : round.parts) {
      s.consumed[part.sequence] += part.count;
      batch[part.sequence].state->position += part.count;
    }
  }
}

}  // namespace mb

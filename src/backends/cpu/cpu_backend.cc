// SPDX-License-Identifier: MIT
#include "backends/cpu/cpu_backend.h"

#include <algorithm>
#include <cstring>

#include "core/error.h"
#include "ops/argmax.h"
#include "ops/attention.h"
#include "ops/causal_conv.h"
#include "ops/ffn.h"
#include "ops/gated_delta_net.h"
#include "ops/gated_rms_norm.h"
#include "ops/mamba2_scan.h"
#include "ops/mamba3_scan.h"
#include "ops/matmul.h"
#include "ops/moe.h"
#include "ops/quant.h"
#include "ops/rms_norm.h"
#include "ops/selective_scan.h"
#include "ops/short_conv.h"

namespace mb {
namespace {

// Host memory seen through views: activations, and weight vectors read in place.
class CpuBuffer final : public Storage {
 public:
  explicit CpuBuffer(float* data) : data(data) {}
  float* data;
};

// A packed host matrix, read in place.
class CpuMatrix final : public Storage {
 public:
  explicit CpuMatrix(const WeightMatrix& w) : w(w) {}
  WeightMatrix w;
};

class CpuStream final : public Stream {
 public:
  View buffer(int slot, int64_t rows, int64_t width, Access) override {
    if (slot >= static_cast<int>(slots_.size())) slots_.resize(slot + 1);
    std::unique_ptr<Slot>& held = slots_[slot];
    if (!held) held = std::make_unique<Slot>();
    const size_t floats = static_cast<size_t>(rows * width);
    if (held->values.size() < floats) {
      held->values.resize(floats);
      held->storage.data = held->values.data();
    }
    return {&held->storage, 0, width};
  }
  size_t bytes() const override {
    size_t total = 0;
    for (const auto& slot : slots_)
      if (slot) total += slot->values.size() * sizeof(float);
    return total + moe_group.size() * sizeof(float);
  }

  ComputeContext ctx;
  // Per-sequence kernel arguments of the batched ops, reused across calls.
  std::vector<CausalConvArgs> conv;
  std::vector<ShortConvArgs> short_conv;
  std::vector<SelectiveScanArgs> scan;
  std::vector<Mamba2ScanSequence> mamba2;
  std::vector<Mamba3ScanSequence> mamba3;
  std::vector<GatedDeltaNetSequence> gdn;
  std::vector<AttentionSequence> attention;
  std::vector<RopeSequence> rope;
  std::vector<WeightMatrix> moe_up, moe_down;  // the experts' host matrices
  // The experts' gathered rows, hidden and output rows when a round's (row, expert) pairs fit one
  // group but not the op's m-row scratch (ops/moe.h: moe_group_rows), e.g. a decode step:
  // [capacity, d_model] + [capacity, up_rows] + [capacity, d_model].
  std::vector<float> moe_group;

 private:
  struct Slot {
    std::vector<float> values;
    CpuBuffer storage{nullptr};
  };
  std::vector<std::unique_ptr<Slot>> slots_;  // stable addresses: views name the storages
};

CpuStream& cpu(Stream& stream) {
  return static_cast<CpuStream&>(stream);
}

// The view's first element (null for an absent view).
float* data(View v) {
  return v ? static_cast<const CpuBuffer*>(v.storage)->data + v.offset : nullptr;
}

WeightMatrix host_matrix(const Matrix& m) {
  return static_cast<const CpuMatrix*>(m.storage)->w;
}

// The floats of a part's state at `offset` of its fixed region.
float* state_at(const Part& part, int64_t offset) {
  return static_cast<HostState*>(part.state)->fixed() + offset;
}

// The SSD chunk length the kernels get: `chunk`, at most the longest sequence of the round. A
// chunk at least as long as a sequence is one chunk of its length either way (and the chunk's
// arithmetic depends only on its contents), so this changes no bits, while the kernels' scratch,
// quadratic in the chunk, stays bounded by the input (--ssd-chunk 1000000000 would ask for
// exabytes).
int64_t ssd_chunk_for(int64_t chunk, std::span<const Part> parts) {
  int64_t longest = 1;
  for (const Part& part : parts) longest = std::max(longest, part.rows);
  return std::min(chunk, longest);
}

}  // namespace

std::string CpuBackend::why_unsupported(const OpQuery&) const {
  return "";
}

std::unique_ptr<Storage> CpuBackend::upload_matrix(const WeightMatrix& host) const {
  return std::make_unique<CpuMatrix>(host);
}

std::unique_ptr<Storage> CpuBackend::upload_floats(const float* host, int64_t) const {
  return std::make_unique<CpuBuffer>(const_cast<float*>(host));  // weights are never written
}

std::unique_ptr<StateStorage> CpuBackend::new_state(const StateShape& shape) const {
  return std::make_unique<HostState>(shape);
}

std::unique_ptr<StateStorage> CpuBackend::adopt_state(const StateShape& shape, int64_t positions,
                                                      std::span<const float> host) const {
  return std::make_unique<HostState>(shape, positions, host);
}

std::unique_ptr<Stream> CpuBackend::new_stream() const {
  return std::make_unique<CpuStream>();
}

bool CpuBackend::owns(const Stream& stream) const {
  return dynamic_cast<const CpuStream*>(&stream) != nullptr;
}

void CpuBackend::begin_round(Stream& stream, const ComputeContext& ctx, std::span<const uint64_t>) const {
  cpu(stream).ctx = ctx;
}

void CpuBackend::end_round(Stream&) const {}

void CpuBackend::cancel_round(Stream&) const {}

void CpuBackend::read_rows(Stream&, View from, int64_t rows, int64_t cols, float* host) const {
  const float* source = data(from);
  for (int64_t r = 0; r < rows; ++r) std::memcpy(host + r * cols, source + r * from.ld, cols * sizeof(float));
}

void CpuBackend::matmul(Stream& stream, const MatmulOp& op) const {
  const ComputeContext& ctx = cpu(stream).ctx;
  View x = op.x;
  if (op.norm.weight) {
    ScopedPhase timer(ctx.profile, op.norm.phase);
    mb::rms_norm(ctx, {data(x), x.ld, op.m, op.w.cols, data(op.norm.weight), op.norm.eps,
                       data(op.norm.scratch), op.norm.scratch.ld});
    x = op.norm.scratch;
  }
  ScopedPhase timer(ctx.profile, op.phase);
  mb::matmul(ctx, {data(x), x.ld, op.m, host_matrix(op.w), data(op.bias), data(op.y), op.y.ld, op.accumulate,
                   op.softplus});
}

void CpuBackend::rms_norm(Stream& stream, const RmsNormOp& op) const {
  const ComputeContext& ctx = cpu(stream).ctx;
  ScopedPhase timer(ctx.profile, op.phase);
  for (const NormSegment& s : op.segments)
    mb::rms_norm(ctx, {data(op.x.column(s.column)), op.x.ld, op.rows, s.dim, data(s.weight), op.eps,
                       data(op.y.column(s.column)), op.y.ld});
}

void CpuBackend::causal_conv(Stream& stream, const CausalConvOp& op) const {
  CpuStream& s = cpu(stream);
  s.conv.resize(op.parts.size());
  for (size_t i = 0; i < op.parts.size(); ++i) {
    const Part& part = op.parts[i];
    s.conv[i] = {data(op.x.row(part.first_row)),
                 op.x.ld,
                 part.rows,
                 op.channels,
                 op.kernel_size,
                 data(op.weight),
                 data(op.bias),
                 state_at(part, op.state_offset),  // [K - 1, channels]
                 data(op.y.row(part.first_row)),
                 op.y.ld};
  }
  ScopedPhase timer(s.ctx.profile, op.phase);
  causal_conv_silu(s.ctx, s.conv);
}

void CpuBackend::short_conv(Stream& stream, const ShortConvOp& op) const {
  CpuStream& s = cpu(stream);
  s.short_conv.resize(op.parts.size());
  for (size_t i = 0; i < op.parts.size(); ++i) {
    const Part& part = op.parts[i];
    s.short_conv[i] = {
        data(op.bcx.row(part.first_row)), op.bcx.ld, part.rows, op.channels, op.kernel_size, data(op.weight),
        state_at(part, op.state_offset),  // [K - 1, channels]
        data(op.y.row(part.first_row)),   op.y.ld};
  }
  ScopedPhase timer(s.ctx.profile, op.phase);
  mb::short_conv(s.ctx, s.short_conv);
}

void CpuBackend::gated_delta_net(Stream& stream, const GatedDeltaNetOp& op) const {
  CpuStream& s = cpu(stream);
  GatedDeltaNetParams p;
  p.n_key_heads = op.n_key_heads;
  p.n_value_heads = op.n_value_heads;
  p.key_dim = op.key_dim;
  p.value_dim = op.value_dim;
  p.tiled_heads = op.tiled_heads;
  p.a_neg = data(op.a_neg);
  p.dt_bias = data(op.dt_bias);
  p.l2_eps = op.l2_eps;
  s.gdn.resize(op.parts.size());
  for (size_t i = 0; i < op.parts.size(); ++i) {
    const Part& part = op.parts[i];
    GatedDeltaNetSequence& a = s.gdn[i];
    a.length = part.rows;
    a.qkv = data(op.qkv.row(part.first_row));
    a.ldqkv = op.qkv.ld;
    a.b = data(op.b.row(part.first_row));
    a.ldb = op.b.ld;
    a.a = data(op.a.row(part.first_row));
    a.lda = op.a.ld;
    a.state = state_at(part, op.state_offset);  // [nv, dv, dk]
    a.y = data(op.y.row(part.first_row));
    a.ldy = op.y.ld;
  }
  ScopedPhase timer(s.ctx.profile, op.phase);
  mb::gated_delta_net(s.ctx, p, s.gdn);
}

void CpuBackend::selective_scan(Stream& stream, const SelectiveScanOp& op) const {
  CpuStream& s = cpu(stream);
  if (op.dt_proj != nullptr) {
    const ScanDtProj& p = *op.dt_proj;
    ScopedPhase timer(s.ctx.profile, p.phase);
    mb::matmul(s.ctx, {data(p.dt_low), p.dt_low.ld, p.m, host_matrix(p.w), data(p.bias), data(op.dt),
                       op.dt.ld, false, true});  // softplus, [m, R] -> [m, D]
  }
  s.scan.resize(op.parts.size());
  for (size_t i = 0; i < op.parts.size(); ++i) {
    const Part& part = op.parts[i];
    SelectiveScanArgs& a = s.scan[i];
    a.length = part.rows;
    a.channels = op.channels;
    a.d_state = op.d_state;
    a.u = data(op.u.row(part.first_row));
    a.ldu = op.u.ld;
    a.dt = data(op.dt.row(part.first_row));
    a.lddt = op.dt.ld;
    a.b = data(op.b.row(part.first_row));
    a.c = data(op.c.row(part.first_row));
    a.ldbc = op.b.ld;
    MB_CHECK(op.c.ld == op.b.ld);
    a.z = op.z ? data(op.z.row(part.first_row)) : nullptr;
    a.ldz = op.z.ld;
    a.a_base2 = data(op.a_base2);
    a.d_skip = data(op.d_skip);
    a.state = state_at(part, op.state_offset);  // [N, channels]
    a.y = data(op.y.row(part.first_row));
    a.ldy = op.y.ld;
  }
  ScopedPhase timer(s.ctx.profile, op.phase);
  mb::selective_scan(s.ctx, s.scan);
}

void CpuBackend::mamba2_scan(Stream& stream, const Mamba2ScanOp& op) const {
  CpuStream& s = cpu(stream);
  Mamba2ScanParams p;
  p.n_heads = op.n_heads;
  p.headdim = op.headdim;
  p.d_state = op.d_state;
  p.n_groups = op.n_groups;
  p.dt_bias = data(op.dt_bias);
  p.a_base2 = data(op.a_base2);
  p.a = data(op.a);
  p.d_skip = data(op.d_skip);
  p.d_skip_per_channel = op.d_skip_per_channel;
  p.dt_min = op.dt_min;
  p.dt_max = op.dt_max;
  p.chunk = ssd_chunk_for(op.chunk, op.parts);
  // On CPUs the sequential recurrence is as fast as the chunked form or faster at every shape
  // measured (bench/mamba2_op_bench: d_state 16 to 128, chunks of 16 to 256, up to 1024
  // positions; BENCHMARKS.md), so Auto picks it: the chunked form only adds work here.
  const bool chunked = op.form == ScanForm::Chunked;
  s.mamba2.resize(op.parts.size());
  for (size_t i = 0; i < op.parts.size(); ++i) {
    const Part& part = op.parts[i];
    Mamba2ScanSequence& a = s.mamba2[i];
    a.length = part.rows;
    a.xbc = data(op.xbc.row(part.first_row));
    a.ldxbc = op.xbc.ld;
    a.dt = data(op.dt.row(part.first_row));
    a.lddt = op.dt.ld;
    a.state = state_at(part, op.state_offset);  // [H, N, P]
    a.y = data(op.y.row(part.first_row));
    a.ldy = op.y.ld;
    a.chunked = chunked;
  }
  ScopedPhase timer(s.ctx.profile, op.phase);
  mb::mamba2_scan(s.ctx, p, s.mamba2);
}

void CpuBackend::gated_rms_norm(Stream& stream, const GatedRmsNormOp& op) const {
  const ComputeContext& ctx = cpu(stream).ctx;
  ScopedPhase timer(ctx.profile, op.phase);
  mb::gated_rms_norm(ctx, {data(op.y), op.y.ld, data(op.z), op.z.ld, op.rows, op.dim, op.group_size,
                           data(op.weight), op.eps, data(op.out), op.out.ld});
}

bool CpuBackend::mamba3_prefers_chunked(int64_t positions, int64_t ssd_chunk) {
  // Measured on one layer of the 130m-sized shape (24 heads of 64 channels, d_state 128; the
  // scan op alone, one thread, bench/mamba3_op_bench): with chunks of 16 to 64 positions the
  // chunked form is 10-25% faster from 32 positions on, about even at 16, and up to 3x slower
  // below that, where its per-chunk setup is not amortized. With chunks of 128 its in-chunk
  // work (quadratic in the chunk length) and working set make it slower at every length.
  return positions >= 32 && ssd_chunk <= 64;
}

void CpuBackend::mamba3_scan(Stream& stream, const Mamba3ScanOp& op) const {
  CpuStream& s = cpu(stream);
  Mamba3ScanParams p;
  p.n_heads = op.n_heads;
  p.headdim = op.headdim;
  p.d_state = op.d_state;
  p.n_groups = op.n_groups;
  p.n_angles = op.n_angles;
  p.dt_bias = data(op.dt_bias);
  p.b_bias = data(op.b_bias);
  p.c_bias = data(op.c_bias);
  p.b_norm = data(op.b_norm);
  p.c_norm = data(op.c_norm);
  p.d_skip = data(op.d_skip);
  p.gate_norm = data(op.gate_norm);
  p.a_floor = op.a_floor;
  p.eps = op.eps;
  p.chunk = ssd_chunk_for(op.chunk, op.parts);
  p.boundary_fold = op.boundary_fold;
  s.mamba3.resize(op.parts.size());
  for (size_t i = 0; i < op.parts.size(); ++i) {
    const Part& part = op.parts[i];
    Mamba3ScanSequence& a = s.mamba3[i];
    a.length = part.rows;
    a.proj = data(op.proj.row(part.first_row));
    a.ldp = op.proj.ld;
    a.state = state_at(part, op.state_offset);  // the layer's block (Mamba3StateLayout)
    a.y = data(op.y.row(part.first_row));
    a.ldy = op.y.ld;
    // The choice depends only on this sequence's own positions in the round, so a sequence
    // computes the same bits in any batch.
    a.chunked = op.form == ScanForm::Chunked ||
                (op.form == ScanForm::Auto && mamba3_prefers_chunked(part.rows, op.chunk));
  }
  ScopedPhase timer(s.ctx.profile, op.phase);
  mb::mamba3_scan(s.ctx, p, s.mamba3);
}

void CpuBackend::embed(Stream& stream, const EmbedOp& op) const {
  ScopedPhase timer(cpu(stream).ctx.profile, op.phase);
  const size_t row_bytes = dtype_row_bytes(op.dtype, op.cols);
  float* y = data(op.y);
  for (size_t t = 0; t < op.tokens.size(); ++t)
    dequantize_row(op.dtype, op.table + op.tokens[t] * row_bytes, op.cols,
                   y + static_cast<int64_t>(t) * op.y.ld);
}

void CpuBackend::write_rows(Stream& stream, const WriteRowsOp& op) const {
  ScopedPhase timer(cpu(stream).ctx.profile, op.phase);
  float* y = data(op.y);
  for (int64_t r = 0; r < op.rows; ++r)
    std::memcpy(y + r * op.y.ld, op.host + r * op.cols, op.cols * sizeof(float));
}

void CpuBackend::argmax(Stream& stream, const ArgmaxOp& op) const {
  ScopedPhase timer(cpu(stream).ctx.profile, op.phase);
  const float* x = data(op.x);
  float* y = data(op.y);
  for (int64_t r = 0; r < op.rows; ++r) y[r] = static_cast<float>(greedy_index(x + r * op.x.ld, op.cols));
}

void CpuBackend::append_rows(Stream& stream, const AppendRowsOp& op) const {
  ScopedPhase timer(cpu(stream).ctx.profile, op.phase);
  for (const Part& part : op.parts) {
    auto& state = static_cast<HostState&>(*part.state);
    MB_CHECK(part.position + part.rows <= state.capacity());
    const float* from = data(op.x.row(part.first_row));
    for (int64_t r = 0; r < part.rows; ++r)
      std::memcpy(state.writable_row(static_cast<size_t>(op.part), part.position + r), from + r * op.x.ld,
                  op.cols * sizeof(float));
  }
}

void CpuBackend::attention(Stream& stream, const AttentionOp& op) const {
  CpuStream& s = cpu(stream);
  const AttentionParams p{op.n_heads, op.n_kv_heads, op.head_dim, op.scale};
  s.attention.resize(op.parts.size());
  for (size_t i = 0; i < op.parts.size(); ++i) {
    const Part& part = op.parts[i];
    auto& state = static_cast<HostState&>(*part.state);
    MB_CHECK(part.position + part.rows <= state.capacity());
    s.attention[i] = {data(op.q.row(part.first_row)),
                      op.q.ld,
                      part.rows,
                      part.position,
                      state.rows(static_cast<size_t>(op.k_part)),  // [positions, kv width]
                      state.rows(static_cast<size_t>(op.v_part)),
                      data(op.y.row(part.first_row)),
                      op.y.ld};
  }
  ScopedPhase timer(s.ctx.profile, op.phase);
  mb::attention(s.ctx, p, s.attention);
}

void CpuBackend::rope(Stream& stream, const RopeOp& op) const {
  CpuStream& s = cpu(stream);
  s.rope.resize(op.parts.size());
  for (size_t i = 0; i < op.parts.size(); ++i) {
    const Part& part = op.parts[i];
    s.rope[i] = {data(op.q.row(part.first_row)),
                 op.q.ld,
                 data(op.k.row(part.first_row)),
                 op.k.ld,
                 part.rows,
                 part.position};
  }
  ScopedPhase timer(s.ctx.profile, op.phase);
  mb::rope(s.ctx, {op.head_dim, op.theta, op.n_heads, op.n_kv_heads, op.rotary_dims}, s.rope);
}

void CpuBackend::glu(Stream& stream, const GluOp& op) const {
  const ComputeContext& ctx = cpu(stream).ctx;
  ScopedPhase timer(ctx.profile, op.phase);
  mb::glu(ctx, {data(op.x), op.x.ld, op.rows, op.width, op.activation, data(op.y), op.y.ld});
}

void CpuBackend::scale(Stream& stream, const ScaleOp& op) const {
  const ComputeContext& ctx = cpu(stream).ctx;
  ScopedPhase timer(ctx.profile, op.phase);
  mb::scale_rows(ctx, {data(op.x), op.x.ld, op.rows, op.cols, op.scale, op.accumulate, data(op.y), op.y.ld});
}

void CpuBackend::moe(Stream& stream, const MoeOp& op) const {
  CpuStream& s = cpu(stream);
  const size_t experts = op.up.size();
  MB_CHECK(op.down.size() == experts);
  s.moe_up.resize(experts);
  s.moe_down.resize(experts);
  for (size_t e = 0; e < experts; ++e) {
    s.moe_up[e] = host_matrix(op.up[e]);
    s.moe_down[e] = host_matrix(op.down[e]);
  }
  const MoeWeights weights{host_matrix(op.router), data(op.correction_bias), s.moe_up, s.moe_down};
  MoeScratch scratch{data(op.logits), op.logits.ld, data(op.routes), op.routes.ld, data(op.rows), op.rows.ld,
                     data(op.hidden), op.hidden.ld, data(op.out),    op.out.ld,    data(op.acc),  op.acc.ld};
  const int64_t capacity = moe_group_rows(op.params, op.m);
  if (capacity > op.m) {
    const int64_t d = op.params.expert_dim(), up = op.params.up_rows();
    const auto floats = static_cast<size_t>(capacity * (2 * d + up));
    if (s.moe_group.size() < floats) s.moe_group.resize(floats);
    scratch.rows = s.moe_group.data();
    scratch.ld_rows = d;
    scratch.hidden = scratch.rows + capacity * d;
    scratch.ld_hidden = up;
    scratch.out = scratch.hidden + capacity * up;
    scratch.ld_out = d;
    scratch.capacity = capacity;
  }
  MoeArgs args{data(op.x), op.x.ld, op.m, data(op.y), op.y.ld, op.accumulate};
  if (op.params.latent > 0) {
    args.xe = data(op.xe);
    args.ldxe = op.xe.ld;
  }
  // The router and the routing are timed as their phase, the experts and sums as the op's.
  {
    ScopedPhase timer(s.ctx.profile, op.router_phase);
    moe_router(s.ctx, op.params, weights, args, scratch);
  }
  ScopedPhase timer(s.ctx.profile, op.phase);
  moe_experts(s.ctx, op.params, weights, args, scratch);
}

}  // namespace mb

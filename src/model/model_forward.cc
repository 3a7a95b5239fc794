// SPDX-License-Identifier: MIT
// Model::forward: the one round loop, for every backend.
#include <algorithm>

#include "core/error.h"
#include "io/safetensors.h"
#include "model/blocks/block.h"
#include "model/model.h"
#include "model/weight_schema.h"

namespace mb {
namespace {

// The model's own weights in Model::weights_ (see model.cc).
constexpr size_t kNormF = 3 + kFinalNorm, kHead = 3 + kLmHead;

// The stream buffers of a round: the residual stream, the feature rows, the heads' rows, the
// outputs the host reads, then the blocks' scratch.
enum Slot : int {
  kHiddenSlot,
  kFeaturesSlot,
  kNormedSlot,
  kLogitsSlot,
  kOutSlot,
  kEmbeddingSlot,
  kFirstScratchSlot
};

bool last_row_output(OutputKind kind) {
  return kind == OutputKind::LogitsLast || kind == OutputKind::ArgmaxLast || kind == OutputKind::HiddenLast;
}

}  // namespace

void Model::forward(const ComputeContext& ctx, std::span<const SequenceInput> batch,
                    const ForwardOptions& options, Workspace& ws,
                    std::vector<std::vector<float>>& outputs) const {
  validate_batch(ctx, batch, options, ws);
  adopt_states(batch, ws);
  if (!ws.stream || !backend_->owns(*ws.stream)) ws.stream = backend_->new_stream();
  ws.stream->timings.clear();
  const int64_t n_seq = static_cast<int64_t>(batch.size());
  outputs.resize(n_seq);
  for (auto& out : outputs) out.clear();
  ws.consumed.assign(n_seq, 0);
  if (options.output == OutputKind::HiddenMean) ws.pooled.assign(n_seq * config_.d_model, 0.0);
  int64_t m = 0, finishing = 0;
  while (plan_round(batch, options, ws, m, finishing))
    run_round(ctx, batch, options, ws, m, finishing, outputs);
}

void Model::validate_batch(const ComputeContext& ctx, std::span<const SequenceInput> batch,
                           const ForwardOptions& options, Workspace& ws) const {
  const int64_t n_seq = static_cast<int64_t>(batch.size());
  if (options.chunk < 0) throw Error("chunk size must be >= 0");
  if (options.ssd_chunk < 0) throw Error("SSD chunk size must be >= 0");
  check_thread_count(ctx.n_threads);
  // Validate everything before any state changes, so a bad request leaves every sequence intact.
  std::vector<int64_t>& total = ws.total;
  total.assign(n_seq, 0);
  for (int64_t i = 0; i < n_seq; ++i) {
    const SequenceInput& in = batch[i];
    if (in.state == nullptr) throw Error("sequence " + std::to_string(i) + " has no state");
    // The message is only built for a mismatch: a steady decode step allocates nothing.
    if (in.state->empty() || in.state->storage()->shape() != state_shape_) {
      const std::string what = "sequence " + std::to_string(i) + "'s state";
      state_layout_.check_size(in.state->floats(), what, in.state->position);
      // The same number of floats in other parts (a state without this model's growing parts).
      throw Error(what + " holds parts of another layout; this model's state has " +
                  state_layout_.describe());
    }
    if (!in.tokens.empty()) {
      for (int32_t id : in.tokens) {
        if (id < 0 || id >= config_.vocab_size)
          throw Error("token id " + std::to_string(id) + " is outside the vocabulary [0, " +
                      std::to_string(config_.vocab_size) + ")");
      }
      total[i] = static_cast<int64_t>(in.tokens.size());
    } else {
      if (input_dim_ == 0)
        throw Error("sequence " + std::to_string(i) +
                    " has no tokens (this checkpoint has no input projection for features)");
      if (in.features.empty() || in.features.size() % input_dim_ != 0)
        throw Error("sequence " + std::to_string(i) + " has " + std::to_string(in.features.size()) +
                    " feature values, not a positive multiple of input_dim " + std::to_string(input_dim_));
      total[i] = static_cast<int64_t>(in.features.size()) / input_dim_;
    }
    // A state's position is an int64 that every round adds to; refused here, before it could wrap
    // (a state loaded from a file may claim any position up to StateLayout's bound, the same 2^40).
    constexpr int64_t kMaxPosition = int64_t{1} << 40;
    if (in.state->position < 0 || in.state->position > kMaxPosition - total[i])
      throw Error("sequence " + std::to_string(i) + "'s state is at position " +
                  std::to_string(in.state->position) + ": " + std::to_string(total[i]) +
                  " more would pass the largest position a state may reach, 2^40");
  }
  // Two sequences advancing one state would both read and write it in the same round (from
  // different threads, in no fixed order), so each state may appear in a batch only once.
  std::vector<const SequenceState*>& sorted = ws.sorted_states;
  sorted.clear();
  for (const SequenceInput& in : batch) sorted.push_back(in.state);
  std::sort(sorted.begin(), sorted.end());
  const auto repeated = std::adjacent_find(sorted.begin(), sorted.end());
  if (repeated != sorted.end()) {
    int64_t first = -1, second = -1;
    for (int64_t i = 0; i < n_seq && second < 0; ++i) {
      if (batch[i].state != *repeated) continue;
      (first < 0 ? first : second) = i;
    }
    throw Error("sequences " + std::to_string(first) + " and " + std::to_string(second) +
                " of the batch share one SequenceState; each state may appear once per forward call");
  }
}

void Model::adopt_states(std::span<const SequenceInput> batch, const Workspace& ws) const {
  for (size_t i = 0; i < batch.size(); ++i) {
    SequenceState& state = *batch[i].state;
    // A state another backend advanced last moves here once (through the host) and then stays.
    if (state.storage()->home() != backend_->state_home())
      state.set_storage(backend_->adopt_state(state_shape_, state.position, state.download()));
    state.storage()->reserve(state.position + ws.total[i]);
  }
}

bool Model::plan_round(std::span<const SequenceInput> batch, const ForwardOptions& options, Workspace& ws,
                       int64_t& m, int64_t& finishing) const {
  ws.parts.clear();
  ws.owner.clear();
  m = 0;
  finishing = 0;
  for (size_t i = 0; i < batch.size(); ++i) {
    const int64_t left = ws.total[i] - ws.consumed[i];
    if (left == 0) continue;
    const int64_t count = options.chunk > 0 && options.chunk < left ? options.chunk : left;
    ws.parts.push_back({batch[i].state->storage(), m, count, batch[i].state->position});
    ws.owner.push_back(static_cast<int64_t>(i));
    m += count;
    finishing += count == left;
  }
  return !ws.parts.empty();
}

void Model::reserve_buffers(const ForwardOptions& options, Workspace& ws, int64_t m,
                            int64_t finishing) const {
  const int64_t d = config_.d_model;
  Stream& stream = *ws.stream;
  const OutputKind kind = options.output;
  ws.hidden = stream.buffer(kHiddenSlot, m, d, Access::Device);  // [m, d] residual stream
  if (reads_embedding_) ws.embedding = stream.buffer(kEmbeddingSlot, m, d, Access::Device);
  ws.scratch.resize(scratch_widths_.size());
  for (size_t i = 0; i < scratch_widths_.size(); ++i)
    ws.scratch[i] =
        stream.buffer(kFirstScratchSlot + static_cast<int>(i), m, scratch_widths_[i], Access::Device);
  if (input_dim_ > 0) ws.features = stream.buffer(kFeaturesSlot, m, input_dim_, Access::Device);
  ws.normed = stream.buffer(kNormedSlot, kind == OutputKind::LogitsAll ? m : finishing, d, Access::Device);
  if (kind == OutputKind::ArgmaxLast)
    ws.logits = stream.buffer(kLogitsSlot, finishing, config_.vocab_size, Access::Device);
  const int64_t out_rows = last_row_output(kind) ? finishing : (kind == OutputKind::None ? 0 : m);
  ws.out = stream.buffer(kOutSlot, out_rows, std::max<int64_t>(output_width(kind), 1), Access::HostRead);
}

void Model::run_round(const ComputeContext& ctx, std::span<const SequenceInput> batch,
                      const ForwardOptions& options, Workspace& ws, int64_t m, int64_t finishing,
                      std::vector<std::vector<float>>& outputs) const {
  Stream& stream = *ws.stream;
  reserve_buffers(options, ws, m, finishing);
  // The key names everything that changes the round's ops: a round with the same key issues the
  // same ops with the same arguments (Vulkan replays its recording of them).
  ws.key.clear();
  ws.key.insert(ws.key.end(),
                {static_cast<uint64_t>(m), static_cast<uint64_t>(options.output),
                 static_cast<uint64_t>(options.scan), static_cast<uint64_t>(options.ssd_chunk)});
  // Ops on growing parts address them by position, so then the positions belong to the key too
  // (a model of fixed parts only replays its decode step at every position).
  const bool positioned = !state_shape_.growing.empty();
  for (size_t r = 0; r < ws.parts.size(); ++r) {
    const Part& part = ws.parts[r];
    const int64_t i = ws.owner[r];
    ws.key.insert(ws.key.end(),
                  {part.state->id(), static_cast<uint64_t>(part.first_row), static_cast<uint64_t>(part.rows),
                   static_cast<uint64_t>(ws.consumed[i] + part.rows == ws.total[i]),
                   static_cast<uint64_t>(!batch[i].tokens.empty())});
    if (positioned) ws.key.push_back(static_cast<uint64_t>(part.position));
  }
  try {
    backend_->begin_round(stream, ctx, ws.key);
    embed_rows(batch, ws);
    LayerContext layer{*backend_, stream,     ws.parts,     m,
                       ws.hidden, ws.scratch, options.scan, options.ssd_chunk};
    if (reads_embedding_) {  // a copy (x * 1 is exact) the blocks cannot overwrite
      const int64_t d = config_.d_model;
      backend_->scale(stream, {ws.hidden, m, d, 1.0f, false, ws.embedding, kEmbedPhase});
      layer.embedding = ws.embedding;
    }
    for (const auto& block : blocks_) {
      const View given = layer.mixer_input;
      block->forward(layer);
      // A mixer input is for the block after the one that set it: dropped once that block ran.
      if (layer.mixer_input.storage == given.storage && layer.mixer_input.offset == given.offset)
        layer.mixer_input = {};
    }
    record_heads(options, ws, m, finishing);
    backend_->end_round(stream);
  } catch (...) {
    backend_->cancel_round(stream);
    throw;
  }
  collect_outputs(options, ws, outputs);
  for (size_t r = 0; r < ws.parts.size(); ++r) {
    ws.consumed[ws.owner[r]] += ws.parts[r].rows;
    batch[ws.owner[r]].state->position += ws.parts[r].rows;
  }
}

void Model::embed_rows(std::span<const SequenceInput> batch, Workspace& ws) const {
  const int64_t d = config_.d_model;
  Stream& stream = *ws.stream;
  // Token rows: one lookup per run of token sequences (their rows are adjacent in the round).
  for (size_t r = 0; r < ws.parts.size(); ++r) {
    const SequenceInput& in = batch[ws.owner[r]];
    const Part& part = ws.parts[r];
    const int64_t start = ws.consumed[ws.owner[r]];
    if (in.tokens.empty()) {
      // Feature rows through the input projection.
      const View features = ws.features.row(part.first_row);
      backend_->write_rows(
          stream, {in.features.data() + start * input_dim_, part.rows, input_dim_, features, kEmbedPhase});
      const Weight& w = weights_[kInputProj];
      backend_->matmul(stream, {features,
                                part.rows,
                                w.matrix,
                                weights_[kInputProjBias].values,
                                ws.hidden.row(part.first_row),
                                false,
                                false,
                                {},
                                kEmbedPhase});  // [rows, input_dim] -> [rows, d]
      continue;
    }
    ws.tokens.clear();
    size_t end = r;
    for (; end < ws.parts.size() && !batch[ws.owner[end]].tokens.empty(); ++end) {
      const auto tokens = batch[ws.owner[end]].tokens.subspan(ws.consumed[ws.owner[end]], ws.parts[end].rows);
      ws.tokens.insert(ws.tokens.end(), tokens.begin(), tokens.end());
    }
    backend_->embed(stream, {embedding_->data, *embedding_->dtype, d, ws.tokens,
                             ws.hidden.row(part.first_row), kEmbedPhase});
    const float multiplier = static_cast<float>(config_.hybrid.embedding_multiplier);
    if (multiplier != 1.0f) {
      const View rows = ws.hidden.row(part.first_row);
      backend_->scale(
          stream, {rows, static_cast<int64_t>(ws.tokens.size()), d, multiplier, false, rows, kEmbedPhase});
    }
    r = end - 1;
  }
}

void Model::record_heads(const ForwardOptions& options, Workspace& ws, int64_t m, int64_t finishing) const {
  const int64_t d = config_.d_model, vocab = config_.vocab_size;
  Stream& stream = *ws.stream;
  const OutputKind kind = options.output;
  const View out = ws.out, normed = ws.normed, hidden = ws.hidden;
  const NormSegment norm_f{0, d, weights_[kNormF].values};
  // norm_f of `rows` rows of the residual stream from `from` into `to`; a row's result does not
  // depend on which rows share the op.
  const auto norm_rows = [&](int64_t from, int64_t rows, View to) {
    backend_->rms_norm(
        stream, {hidden.row(from), rows, std::span(&norm_f, 1), config_.norm_eps, to, kFinalNormPhase});
  };
  const Matrix head = weights_[kHead].matrix;
  // Logits divided by the config's logits_scaling (Granite-4.0-H), as a product by its inverse.
  const float logit_scale = static_cast<float>(1.0 / config_.hybrid.logits_scaling);
  const auto scale_logits = [&](View logits, int64_t rows) {
    if (logit_scale != 1.0f)
      backend_->scale(stream, {logits, rows, vocab, logit_scale, false, logits, kLmHeadPhase});
  };
  switch (kind) {
    case OutputKind::None:
      return;
    case OutputKind::LogitsLast:
    case OutputKind::ArgmaxLast:
    case OutputKind::HiddenLast: {
      // The last row of each finishing sequence goes to the next slot; runs of adjacent rows (every
      // row of a decode step) take one op. Intermediate positions skip the LM head.
      const View to = kind == OutputKind::HiddenLast ? out : normed;
      int64_t slot = 0, run_from = -1, run_rows = 0;
      for (size_t r = 0; r < ws.parts.size(); ++r) {
        const Part& part = ws.parts[r];
        if (ws.consumed[ws.owner[r]] + part.rows != ws.total[ws.owner[r]]) continue;
        const int64_t row = part.first_row + part.rows - 1;
        if (run_rows > 0 && row == run_from + run_rows) {
          ++run_rows;
        } else {
          if (run_rows > 0) norm_rows(run_from, run_rows, to.row(slot - run_rows));
          run_from = row;
          run_rows = 1;
        }
        ++slot;
      }
      if (run_rows > 0) norm_rows(run_from, run_rows, to.row(slot - run_rows));
      if (kind == OutputKind::HiddenLast || finishing == 0) return;
      if (kind == OutputKind::LogitsLast) {
        backend_->matmul(stream,
                         {normed, finishing, head, {}, out, false, false, {}, kLmHeadPhase});  // [f, vocab]
        scale_logits(out, finishing);
        return;
      }
      const View logits = ws.logits;
      backend_->matmul(stream, {normed, finishing, head, {}, logits, false, false, {}, kLmHeadPhase});
      scale_logits(logits, finishing);
      backend_->argmax(stream, {logits, finishing, vocab, out, kArgmaxPhase});  // the greedy ids [f]
      return;
    }
    case OutputKind::HiddenAll:
    case OutputKind::HiddenMean:
      norm_rows(0, m, out);
      return;
    case OutputKind::LogitsAll:
      norm_rows(0, m, normed);
      backend_->matmul(stream, {normed, m, head, {}, out, false, false, {}, kLmHeadPhase});  // [m, vocab]
      scale_logits(out, m);
      return;
  }
}

void Model::collect_outputs(const ForwardOptions& options, Workspace& ws,
                            std::vector<std::vector<float>>& outputs) const {
  const View out = ws.out;
  const int64_t d = config_.d_model;
  const OutputKind kind = options.output;
  const int64_t width = output_width(kind);
  int64_t slot = 0;
  for (size_t r = 0; r < ws.parts.size(); ++r) {
    const Part& part = ws.parts[r];
    const int64_t i = ws.owner[r];
    const bool last = ws.consumed[i] + part.rows == ws.total[i];
    std::vector<float>& dest = outputs[i];
    switch (kind) {
      case OutputKind::None:
        break;
      case OutputKind::LogitsLast:
      case OutputKind::ArgmaxLast:
      case OutputKind::HiddenLast:
        if (!last) break;
        dest.resize(width);
        backend_->read_rows(*ws.stream, out.row(slot++), 1, width, dest.data());
        break;
      case OutputKind::LogitsAll:
      case OutputKind::HiddenAll: {
        const size_t old = dest.size();
        dest.resize(old + part.rows * width);
        backend_->read_rows(*ws.stream, out.row(part.first_row), part.rows, width, dest.data() + old);
        break;
      }
      case OutputKind::HiddenMean: {
        // Summed on the host in double, position after position.
        ws.mean_rows.resize(part.rows * d);
        backend_->read_rows(*ws.stream, out.row(part.first_row), part.rows, d, ws.mean_rows.data());
        double* sum = ws.pooled.data() + i * d;
        for (int64_t t = 0; t < part.rows; ++t)
          for (int64_t k = 0; k < d; ++k) sum[k] += ws.mean_rows[t * d + k];
        if (last) {
          dest.resize(d);
          for (int64_t k = 0; k < d; ++k) dest[k] = static_cast<float>(sum[k] / ws.total[i]);
        }
        break;
      }
    }
  }
}

}  // namespace mb

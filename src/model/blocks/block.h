// SPDX-License-Identifier: MIT
// A block of a model: one step of the residual stream (a Mamba mixer today; attention, an MLP or
// a mixture of experts in the hybrids), owning its weights, the parts of the sequence state it
// keeps, and the scratch it needs per row. Its forward is a short list of ops on the backend
// (backends/backend.h), so it runs on every backend unchanged; Model::forward calls every block
// of the model in order, once per round.
//
// A new kind of block is one file here with its tensor schema (weight_schema.h), its state
// parts, its phases and its forward, plus its entry in make_block (blocks.cc).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string_view>
#include <vector>

#include "backends/backend.h"
#include "model/config.h"
#include "model/state_layout.h"
#include "model/weight_schema.h"

namespace mb {

class WeightBinder;

// What a block's forward works on: one round of the batch.
struct LayerContext {
  const Backend& backend;
  Stream& stream;
  std::span<const Part> parts;    // the round's sequences, their rows in order
  int64_t m = 0;                  // rows of the round
  View hidden;                    // [m, d_model]: the residual stream, read and updated
  std::span<const View> scratch;  // the round's scratch buffers, [m, width] each (Block::scratch_widths)
  ScanForm scan = ScanForm::Sequential;
  int64_t ssd_chunk = 0;  // 0 = the config's chunk_size
  // [m, d_model]: the round's rows as embedded, before any block (Zamba2's shared blocks read
  // concat(hidden, embedding)); set only in a model with a block whose reads_embedding() is true.
  View embedding{};
  // [m, d_model]: where set, the next Mamba-2 mixer normalizes and mixes these rows instead of the
  // residual stream, which it still adds its output to (a Zamba2 hybrid layer feeds it hidden +
  // the shared block's output). Set by a block for the next one only: Model::forward drops it once
  // the block it was given to has run.
  View mixer_input{};
};

class Block {
 public:
  Block(BlockKind kind, const BlockSpec& spec) : kind_(kind), layer_(spec.layer) {}
  virtual ~Block() = default;
  Block(const Block&) = delete;
  Block& operator=(const Block&) = delete;

  BlockKind kind() const { return kind_; }
  PhaseId first_phase() const { return first_phase_; }
  int64_t layer() const { return layer_; }

  // The parts of the state this block keeps, in order (appended to the model's StateLayout).
  virtual std::vector<StatePart> state_parts() const = 0;
  // Floats per row of each scratch buffer its forward uses (LayerContext::scratch).
  virtual std::vector<int64_t> scratch_widths() const = 0;
  // The names of its profiling phases, local ids 0, 1, ... (phase() maps them to the model's).
  virtual std::span<const std::string_view> phase_names() const = 0;
  // Every op its forward issues, for the backend to say whether it can run them.
  virtual std::vector<OpQuery> ops() const = 0;
  virtual void forward(LayerContext& ctx) const = 0;
  // Whether its forward reads LayerContext::embedding.
  virtual bool reads_embedding() const { return false; }
  // Bytes of packed weight matrices that one row of a decode step reads: all of the block's, except
  // where a block reads only some (a mixture of experts, its top_k chosen experts). `mambacpp
  // bench` counts a decode step's weight traffic with it.
  virtual size_t step_matrix_bytes() const;

  // Set by the model: where the block's state parts are (its layer of the model's StateLayout:
  // fixed parts at offsets of the fixed region, growing parts by index), and its first phase id.
  void place(const LayerStateLayout& state, PhaseId first_phase) {
    state_ = state;
    first_phase_ = first_phase;
  }
  // Makes the backend's copy of every weight (the host copies must still be there).
  void upload(const Backend& backend, std::vector<std::unique_ptr<Storage>>& store) {
    upload_weights(backend, weights_, store);
  }

 protected:
  PhaseId phase(int local) const { return first_phase_ + local; }
  // Where the block's fixed parts start in the fixed region of a state.
  int64_t state_offset() const { return state_.offset; }
  // The block's state parts as the model laid them out.
  const LayerStateLayout& state_layout() const { return state_; }
  const Weight& weight(size_t index) const { return weights_[index]; }
  Matrix matrix(size_t index) const { return weights_[index].matrix; }
  View values(size_t index) const { return weights_[index].values; }

  // Bound by the derived constructor from its schema (indexed by its tensor enum), then any
  // vectors it derives from them at load (appended after the schema's).
  std::vector<Weight> weights_;

 private:
  BlockKind kind_;
  int64_t layer_;
  LayerStateLayout state_;
  PhaseId first_phase_ = 0;
};

// The block of `spec`, its weights bound through `binder`.
std::unique_ptr<Block> make_block(const ModelConfig& config, const BlockSpec& spec, WeightBinder& binder);

// A derived f32 vector kept by the binder, as a weight to upload with the bound ones.
Weight derived_weight(WeightBinder& binder, std::vector<float> values);

// A block's output projection added to the residual stream: hidden += x W^T (+ bias) in one
// accumulating product, or, with a residual multiplier other than 1 (Granite-4.0-H), the product
// into `out` ([m, W.rows] scratch) and then hidden += out * multiplier, as the reference computes
// `residual + branch * multiplier`. Both steps are timed as `phase`.
void add_to_residual(const LayerContext& ctx, View x, Matrix w, View bias, float multiplier, View out,
                     PhaseId phase);

}  // namespace mb

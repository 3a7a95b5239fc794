// SPDX-License-Identifier: MIT
// A loaded model: an embedding, a list of blocks built from the config (model/blocks/), a final
// norm and a head, with immutable weights shared by any number of sequences, and the forward pass
// over batches of sequences. Per-sequence recurrent state lives in SequenceState, outside.
//
// Model::forward is the only round loop, for every backend: it validates the batch, moves each
// state to the model's backend, and runs rounds of at most `chunk` positions per sequence. A
// round embeds its rows, runs every block's ops over them (backends/backend.h), then the heads;
// the positions of all sequences are rows of the same GEMMs, and the per-sequence ops (conv,
// scans) run on each sequence's own state. A decode step is the case of one position per
// sequence; scratch memory is bounded by the chunk, not the input.
//
// Exactness: every per-element result is one fixed sequence of operations (see ops/), so the
// outputs and final states are bit-identical whatever the batch composition, the chunk size,
// the thread count, the backend, or whether positions come one per call or all at once.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "backends/backend.h"
#include "core/dtype.h"
#include "core/profile.h"
#include "core/progress.h"
#include "core/threading.h"
#include "model/config.h"
#include "model/device.h"
#include "model/state_layout.h"
#include "ops/matmul.h"
#include "ops/scan_form.h"

namespace mb {

class Block;
class WeightBinder;
class TensorSet;
struct StoredTensor;
struct Weight;

// Recurrent state of one sequence, held by a backend (host memory for the CPU, device buffers
// for a GPU), and the number of positions it has consumed. What it holds is the model's
// StateLayout: fixed parts (conv, SSM) and parts that grow with the position (KV caches), which
// take memory for the positions used, in blocks, never for a maximum context.
//
// A copy is a fork in the same place (on a device, a device-side copy; nothing passes through
// the host) sized to what the state has used. Reading the values is an explicit download().
class SequenceState {
 public:
  SequenceState() = default;
  // A host state whose fixed region is `values` (no growing parts): the host form of a state of a
  // model without KV caches, as a state file stores it. Model::forward checks it fits the model.
  SequenceState(std::vector<float> values, int64_t position);
  SequenceState(std::unique_ptr<StateStorage> storage, int64_t position);
  SequenceState(const SequenceState& other);
  SequenceState& operator=(const SequenceState& other);
  SequenceState(SequenceState&&) noexcept = default;
  SequenceState& operator=(SequenceState&&) noexcept = default;

  int64_t position = 0;  // positions consumed so far

  // The host form: every fixed part, then each growing part's used positions (see state_layout.h);
  // downloaded when the state lives on a device.
  std::vector<float> download() const;
  // Floats and bytes of the host form: what a state file, a slot file or the prefix cache holds.
  size_t floats() const;
  size_t bytes() const { return floats() * sizeof(float); }
  bool empty() const { return storage_ == nullptr; }
  // True when a device holds the state (not host memory).
  bool on_device() const { return storage_ != nullptr && storage_->home() != nullptr; }
  StateStorage* storage() const { return storage_.get(); }
  void set_storage(std::unique_ptr<StateStorage> storage) { storage_ = std::move(storage); }

 private:
  std::unique_ptr<StateStorage> storage_;
};

enum class OutputKind {
  None,        // only advance the state
  LogitsLast,  // [1, vocab_size]: LM head at the last new position (intermediate positions skip it)
  LogitsAll,   // [T, vocab_size]
  HiddenLast,  // [1, d_model] after norm_f
  HiddenAll,   // [T, d_model] after norm_f
  HiddenMean,  // [1, d_model]: norm_f output averaged over the new positions
  ArgmaxLast,  // [1]: ops/argmax.h's greedy index of the LogitsLast row, as a float (exact)
};

// One sequence of a batch: its state and its new positions, as token ids or as raw feature
// rows (checkpoints with an input projection).
struct SequenceInput {
  SequenceState* state = nullptr;
  std::span<const int32_t> tokens;
  std::span<const float> features;  // [T, input_dim] row-major when tokens is empty
};

struct ForwardOptions {
  OutputKind output = OutputKind::LogitsLast;
  // Positions per sequence per round; 0 = all at once. The default bounds scratch memory for
  // long inputs. With the sequential scan the chunk never changes a bit; with the chunked scan
  // each round is a continued window (equal within rounding).
  int64_t chunk = 512;
  ScanForm scan = ScanForm::Sequential;  // Mamba-2 and Mamba-3; Mamba-1 is always sequential
  int64_t ssd_chunk = 0;                 // SSD chunk length; 0 = the config's chunk_size
};

// Reusable scratch for forward calls: the round's bookkeeping and the backend's Stream (the
// activation buffers, which grow to the largest round seen and are then reused, so steady-state
// calls allocate nothing). One per concurrent caller.
struct Workspace {
  std::vector<int64_t> total, consumed, owner;
  std::vector<Part> parts;
  std::vector<double> pooled;
  std::vector<const SequenceState*> sorted_states;  // the batch's states, sorted to find repeats
  std::vector<uint64_t> key;
  std::vector<int32_t> tokens;   // a run of token sequences' ids, embedded at once
  std::vector<float> mean_rows;  // HiddenMean's rows of one sequence, summed on the host
  // The round's buffers: the residual stream, feature rows, normalized rows for the LM head,
  // the logits argmax reads, the outputs the host reads, and the blocks' scratch.
  View hidden, features, normed, logits, out;
  View embedding;  // the round's embedded rows, kept for blocks that read them (LayerContext)
  std::vector<View> scratch;
  std::unique_ptr<Stream> stream;  // the model's backend's, made on first use
  // Bytes of the activation buffers held.
  size_t bytes() const { return stream ? stream->bytes() : 0; }
};

// Profiling phases (core/profile.h) are ids into Model::phase_names(): the model's own first,
// then each kind of block's, from kFirstBlockPhase in the order of first appearance.
inline constexpr PhaseId kEmbedPhase = 0;
inline constexpr PhaseId kFinalNormPhase = 1;
inline constexpr PhaseId kLmHeadPhase = 2;
inline constexpr PhaseId kArgmaxPhase = 3;
inline constexpr PhaseId kFirstBlockPhase = 4;

struct LoadOptions {
  std::optional<DType> weight_dtype;  // empty = as stored
  DeviceSpec device;                  // where forward runs (weights are uploaded there at load)
  // With a device: keep the host copy of the packed weight matrices after the upload, so that
  // set_device can move the model to the CPU or another device later. Off by default: forward
  // reads the device's copy, and the host copy would double the model's memory.
  bool keep_host_weights = false;
  // When set, the load reports the checkpoint's bytes to it as its tensors are bound (the CLI
  // shows it as a progress line on a terminal); it must outlive the call.
  ProgressLine* progress = nullptr;
};

class Model {
 public:
  ~Model();
  static std::unique_ptr<Model> load(const std::string& dir, const LoadOptions& options = {});
  Model(const Model&) = delete;
  Model& operator=(const Model&) = delete;

  const ModelConfig& config() const { return config_; }
  int64_t input_dim() const { return input_dim_; }  // 0 when the checkpoint has no input projection
  DType matrix_dtype() const;
  // Bytes of all packed weight matrices (LM head included): the weight traffic of a decode step.
  size_t matrix_bytes() const;
  // Bytes of the packed weight matrices one sequence's decode step reads: matrix_bytes() less the
  // experts a mixture-of-experts block leaves unchosen (each row reads top_k of them).
  size_t step_matrix_bytes() const;
  // What one sequence's state holds, per layer: named parts with shapes and offsets.
  const StateLayout& state_layout() const { return state_layout_; }
  // Floats of the fixed parts of a state (its host form at position 0).
  size_t state_floats() const { return state_layout_.total_floats(); }
  // The names of the profiling phases, indexed by PhaseId: the embedding, final norm, LM head and
  // argmax of every model, then the blocks' phases.
  std::vector<std::string> phase_names() const;
  // Identifies the checkpoint (config and stored weight bytes, independent of the load dtype),
  // so saved states are never restored into a different model.
  uint64_t fingerprint() const { return fingerprint_; }
  // A zero state in the model's backend.
  SequenceState new_state() const;
  // A state holding `host`, the host form of a state of `position` positions (a state file's
  // contents), in the model's backend; throws mb::Error when it does not fit the layout.
  SequenceState state_from_host(std::span<const float> host, int64_t position, const std::string& what) const;

  // Runs every sequence's new positions; `outputs[i]` receives sequence i's output rows
  // (resized as needed). Throws mb::Error for out-of-range token ids, malformed inputs, a state
  // named by two sequences of the batch, or a thread count outside [1, kMaxThreads], before
  // touching any state.
  void forward(const ComputeContext& ctx, std::span<const SequenceInput> batch, const ForwardOptions& options,
               Workspace& workspace, std::vector<std::vector<float>>& outputs) const;

  // Width of one output row for `kind`.
  int64_t output_width(OutputKind kind) const;

  // Where forward runs.
  const Backend& backend() const { return *backend_; }
  bool on_device() const { return backend_->state_home() != nullptr; }
  // Moves forward onto `spec`'s device (uploading the weights) or back to the CPU. Throws
  // mb::Error for a model loaded for a device without keep_host_weights (its host matrices are
  // gone), or for a device that cannot run one of the blocks' ops (the model stays where it was).
  void set_device(const DeviceSpec& spec);
  // The same with a backend made by the caller (tests: options of their own).
  void set_backend(std::shared_ptr<const Backend> backend);
  // Device time per phase of the last forward call through `workspace` (empty on the CPU).
  std::vector<DevicePhaseTime> device_timings(const Workspace& workspace) const;
  // Bytes of packed weight matrices held in host memory (0 once a device-only load dropped them).
  size_t host_matrix_bytes() const;
  // False once a device-only load dropped the host matrices: nothing may read or upload them.
  bool has_host_matrices() const { return !host_matrices_released_; }

  std::span<const std::unique_ptr<Block>> blocks() const { return blocks_; }
  Block& block(size_t index) { return *blocks_[index]; }
  // Appends a block after the config's (a block kind of the caller's own: tests, experiments):
  // its state parts join the layout, and its weights the backend. Throws mb::Error when the
  // backend cannot run its ops. States made before no longer fit the model.
  void append_block(std::unique_ptr<Block> block);

 private:
  Model();
  void bind(const ModelConfig& config, std::shared_ptr<const TensorSet> tensors, const LoadOptions& options);
  // Adds a block's state parts, phases and scratch to the model's.
  void add_block(std::unique_ptr<Block> block);
  // Throws mb::Error naming the first op `backend` cannot run.
  void check_support(const Backend& backend) const;
  // Throws for a malformed batch before any state changes; fills ws.total.
  void validate_batch(const ComputeContext& ctx, std::span<const SequenceInput> batch,
                      const ForwardOptions& options, Workspace& ws) const;
  // Moves each state to the backend and makes room for its new positions.
  void adopt_states(std::span<const SequenceInput> batch, const Workspace& ws) const;
  // Plans the next round into ws.parts and ws.owner; false when every sequence is done.
  bool plan_round(std::span<const SequenceInput> batch, const ForwardOptions& options, Workspace& ws,
                  int64_t& m, int64_t& finishing) const;
  void run_round(const ComputeContext& ctx, std::span<const SequenceInput> batch,
                 const ForwardOptions& options, Workspace& ws, int64_t m, int64_t finishing,
                 std::vector<std::vector<float>>& outputs) const;
  // Reserves the round's buffers (before it begins: growing one invalidates a recording).
  void reserve_buffers(const ForwardOptions& options, Workspace& ws, int64_t m, int64_t finishing) const;
  void embed_rows(std::span<const SequenceInput> batch, Workspace& ws) const;
  // The final norm and the head, into ws.out.
  void record_heads(const ForwardOptions& options, Workspace& ws, int64_t m, int64_t finishing) const;
  void collect_outputs(const ForwardOptions& options, Workspace& ws,
                       std::vector<std::vector<float>>& outputs) const;

  ModelConfig config_;
  int64_t input_dim_ = 0;
  std::shared_ptr<const TensorSet> tensors_;
  std::shared_ptr<WeightBinder> binder_;     // owns converted weight storage
  const StoredTensor* embedding_ = nullptr;  // [vocab_rows or vocab_size, d_model], read in place for lookups
  std::vector<Weight> weights_;              // the model's own: ModelTensor, then ModelTailTensor
  std::vector<std::unique_ptr<Block>> blocks_;  // in order
  std::vector<std::string> phase_names_;
  StateLayout state_layout_;  // built once from the blocks
  StateShape state_shape_;
  std::vector<int64_t> scratch_widths_;  // the most floats per row each scratch buffer needs
  bool reads_embedding_ = false;         // a block reads LayerContext::embedding
  uint64_t fingerprint_ = 0;
  std::shared_ptr<const Backend> backend_;
  std::vector<std::unique_ptr<Storage>> uploaded_;  // the backend's copies of every weight
  // Set once the device's copy is the only one: the host matrices are gone, and nothing may run
  // the CPU path or upload again.
  bool host_matrices_released_ = false;
};

}  // namespace mb

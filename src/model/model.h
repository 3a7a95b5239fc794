// A loaded model: immutable weights shared by any number of sequences, plus the forward pass
// over batches of sequences. Per-sequence recurrent state lives in SequenceState, outside.
//
// One forward call runs a batch of sequences, each with its own number of new positions, as
// one pass over the weights: the positions of all sequences are rows of the same GEMMs, and
// the per-channel phases (conv, scan) run per sequence on their own state. A decode step is
// the case of one position per sequence. Long inputs run in rounds of at most `chunk`
// positions per sequence, so scratch memory is bounded by the chunk, not the input.
//
// Exactness: every per-element result is one fixed sequence of operations (see ops/), so the
// outputs and final states are bit-identical whatever the batch composition, the chunk size,
// the thread count, or whether positions come one per call or all at once.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/profile.h"
#include "core/threading.h"
#include "model/config.h"
#include "model/device.h"
#include "model/state_layout.h"
#include "ops/causal_conv.h"
#include "ops/mamba2_scan.h"
#include "ops/mamba3_scan.h"
#include "ops/matmul.h"
#include "ops/selective_scan.h"

namespace mb {

class WeightBinder;
class TensorSet;
struct StoredTensor;

// Recurrent state of one sequence: all layers' buffers in one flat f32 array, so that a fork
// is a copy and a snapshot is a write of `values`. What the array holds is the model's
// StateLayout (Model::state_layout).
//
// A model running on a device keeps the state there between calls (`device`), and `values`
// is then only as new as the last sync_to_host(). Copying a state downloads the device copy
// into the new state's values (a fork on the device is rare; a fork on the host is exact), and
// to replace a state's contents, assign a new SequenceState (which drops the device copy).
struct SequenceState {
  std::vector<float> values;
  int64_t position = 0;                 // positions consumed so far
  std::unique_ptr<DeviceState> device;  // the current values when set, else null

  SequenceState() = default;
  SequenceState(std::vector<float> initial, int64_t at) : values(std::move(initial)), position(at) {}
  SequenceState(const SequenceState& other);
  SequenceState& operator=(const SequenceState& other);
  SequenceState(SequenceState&&) noexcept = default;
  SequenceState& operator=(SequenceState&&) noexcept = default;

  // Makes `values` current (downloads the device copy, which stays the one forward calls use).
  void sync_to_host();
  // The current values, downloaded when the device holds them.
  std::vector<float> host_values() const;
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

// How Mamba-2 and Mamba-3 run a round's positions of one sequence: the sequential recurrence
// (bit-identical to decode steps, the default), the chunked SSD form (equal up to rounding, faster
// for long rounds), or the architecture's choice by the round's length. With the chunked form
// each round is a window continued from the last, so the round size changes results within
// rounding; only the sequential form keeps the exactness contract.
enum class ScanForm { Auto, Sequential, Chunked };

struct ForwardOptions {
  OutputKind output = OutputKind::LogitsLast;
  // Positions per sequence per round; 0 = all at once. The default bounds scratch memory for
  // long inputs. With the sequential scan the chunk never changes a bit; with the chunked scan
  // each round is a continued window (equal within rounding).
  int64_t chunk = 512;
  ScanForm scan = ScanForm::Sequential;  // Mamba-2 and Mamba-3; Mamba-1 is always sequential
  int64_t ssd_chunk = 0;                 // SSD chunk length; 0 = the config's chunk_size
};

// The rows of one round's hidden buffer that belong to one sequence.
struct RowRange {
  SequenceState* state;
  int64_t begin, count;
};

// An architecture's own reusable scratch (its per-sequence op arguments), kept in
// Workspace::layers so that Workspace names no architecture.
class LayerScratch {
 public:
  virtual ~LayerScratch() = default;
};

// Reusable scratch for forward calls; grows to the largest round seen and is then reused,
// so steady-state calls allocate nothing. One per concurrent caller.
struct Workspace {
  std::vector<float> arena;
  std::vector<int64_t> total, consumed, owner;
  std::vector<RowRange> rows;
  std::vector<double> pooled;
  std::vector<const SequenceState*> sorted_states;  // the batch's states, sorted to find repeats
  std::unique_ptr<LayerScratch> layers;             // the architecture's, made on first use
  std::unique_ptr<DeviceWorkspace> device;          // a device executor's buffers and recorded steps
  float* reserve(size_t floats) {
    if (arena.size() < floats) arena.resize(floats);
    return arena.data();
  }
  // The architecture's scratch of type T, made on first use (and again when a workspace moves
  // between models of different architectures).
  template <class T>
  T& layer_scratch() {
    auto* held = dynamic_cast<T*>(layers.get());
    if (held == nullptr) {
      layers = std::make_unique<T>();
      held = static_cast<T*>(layers.get());
    }
    return *held;
  }
};

// Profiling phases (core/profile.h) are ids into Model::phase_names(). The three that
// Model::forward times around the layers come first; each architecture numbers its own layer
// phases from kFirstLayerPhase, in the order of its layer_phase_names().
inline constexpr PhaseId kEmbedPhase = 0;
inline constexpr PhaseId kFinalNormPhase = 1;
inline constexpr PhaseId kLmHeadPhase = 2;
inline constexpr PhaseId kFirstLayerPhase = 3;

struct LoadOptions {
  std::optional<DType> weight_dtype;  // empty = as stored
  DeviceSpec device;                  // where forward runs (weights are uploaded there at load)
  // With a device: keep the host copy of the packed weight matrices after the upload, so that
  // set_device can move the model to the CPU or another device later. Off by default: forward
  // reads the device's copy, and the host copy would double the model's memory.
  bool keep_host_weights = false;
};

class Model {
 public:
  virtual ~Model() = default;
  static std::unique_ptr<Model> load(const std::string& dir, const LoadOptions& options = {});

  const ModelConfig& config() const { return config_; }
  int64_t input_dim() const { return input_proj_.cols; }  // 0 when the checkpoint has no input projection
  DType matrix_dtype() const { return lm_head_.dtype; }
  // Bytes of all packed weight matrices (LM head included): the weight traffic of a decode step.
  size_t matrix_bytes() const;
  // What one sequence's state holds, per layer: named parts with shapes and offsets.
  const StateLayout& state_layout() const { return state_layout_; }
  size_t state_floats() const { return state_layout_.total_floats(); }
  // The names of the profiling phases, indexed by PhaseId: the embedding, final norm and LM head
  // of every architecture, then the architecture's own layer phases.
  std::vector<std::string> phase_names() const;
  // Identifies the checkpoint (config and stored weight bytes, independent of the load dtype),
  // so saved states are never restored into a different model.
  uint64_t fingerprint() const { return fingerprint_; }
  SequenceState new_state() const { return SequenceState(std::vector<float>(state_floats(), 0.0f), 0); }

  // Runs every sequence's new positions; `outputs[i]` receives sequence i's output rows
  // (resized as needed). Throws mb::Error for out-of-range token ids, malformed inputs, a state
  // named by two sequences of the batch, or a thread count outside [1, kMaxThreads], before
  // touching any state.
  void forward(const ComputeContext& ctx, std::span<const SequenceInput> batch, const ForwardOptions& options,
               Workspace& workspace, std::vector<std::vector<float>>& outputs) const;

  // Width of one output row for `kind`.
  int64_t output_width(OutputKind kind) const;

  // The device forward runs on; null on the CPU.
  const DeviceExecutor* device() const { return device_.get(); }
  // Moves forward onto `spec`'s device (uploading the weights) or back to the CPU. Throws
  // mb::Error for a model loaded for a device without keep_host_weights: its host matrices are gone.
  void set_device(const DeviceSpec& spec);
  // Runs forward through `executor` (null: on the CPU); for executors made with options of their
  // own. The same error as set_device when the host matrices are gone.
  void set_executor(std::unique_ptr<DeviceExecutor> executor);
  // Bytes of packed weight matrices held in host memory (0 once a device-only load dropped them).
  size_t host_matrix_bytes() const;
  // False once a device-only load dropped the host matrices: nothing may read or upload them.
  bool has_host_matrices() const { return !host_matrices_released_; }

  // The weights shared by every architecture, for device executors to upload.
  const StoredTensor& embedding() const { return *embedding_; }
  const WeightMatrix& lm_head() const { return lm_head_; }
  const float* norm_f() const { return norm_f_; }
  const WeightMatrix& input_proj() const { return input_proj_; }
  const float* input_proj_bias() const { return input_proj_bias_; }

 protected:
  using Rows = RowRange;
  // The architecture's layer stack over one round: hidden [M, d_model] in, residual stream out.
  virtual void forward_layers(const ComputeContext& ctx, std::span<const Rows> rows, float* hidden, int64_t m,
                              const ForwardOptions& options, Workspace& workspace, float* scratch) const = 0;
  // Scratch floats forward_layers needs per row.
  virtual size_t scratch_floats_per_row() const = 0;
  // The names of the architecture's layer phases, for ids kFirstLayerPhase onwards.
  virtual std::span<const std::string_view> layer_phase_names() const = 0;

  // The first step of every architecture's constructor: keeps the config and the tensors, checks
  // the layer indices, resolves the bias presence a config leaves to the checkpoint, and binds the
  // embedding, final norm, LM head and optional input projection shared by all architectures.
  WeightBinder& bind_common(const ModelConfig& config, std::shared_ptr<const TensorSet> tensors,
                            const LoadOptions& options);

  ModelConfig config_;
  const StoredTensor* embedding_ = nullptr;  // [vocab_rows or vocab_size, d_model], read in place for lookups
  WeightMatrix lm_head_;  // packed [vocab_size, d_model]: the real rows of lm_head (tied: of the embedding)
  const float* norm_f_ = nullptr;           // [d_model]
  WeightMatrix input_proj_;                 // [d_model, input_dim] or empty
  const float* input_proj_bias_ = nullptr;  // [d_model] or null
  std::shared_ptr<const TensorSet> tensors_;
  std::shared_ptr<WeightBinder> binder_;  // owns converted weight storage
  uint64_t fingerprint_ = 0;
  std::unique_ptr<DeviceExecutor> device_;  // null: forward runs on the CPU
  // Set once the device's copy is the only one: the WeightMatrix pointers of the layers, the LM
  // head and the input projection dangle, and nothing may run the CPU path or upload again.
  bool host_matrices_released_ = false;
  StateLayout state_layout_;  // built once by the architecture's constructor

 private:
  // Throws for a malformed batch before any state changes; fills ws.total.
  void validate_batch(const ComputeContext& ctx, std::span<const SequenceInput> batch,
                      const ForwardOptions& options, Workspace& ws) const;
  void forward_cpu(const ComputeContext& ctx, std::span<const SequenceInput> batch,
                   const ForwardOptions& options, Workspace& ws,
                   std::vector<std::vector<float>>& outputs) const;
};

}  // namespace mb

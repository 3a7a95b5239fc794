// SPDX-License-Identifier: MIT
// The op interface every compute backend implements (the CPU, a Vulkan device; later others).
//
// A model runs its layers as a sequence of op calls on a Backend: the same calls, with the same
// arguments, whichever backend executes them. Model::forward is the only round loop; a block
// (a Mamba mixer, later attention or an MLP) is a short list of ops; an architecture reaches a
// device by its ops alone. Each op takes a small struct of device-neutral views (a Storage plus
// offsets and row strides, never raw pointers) and one per-caller Stream, so one backend serves
// any number of concurrent callers, each with its own activations and recordings.
//
// Exactness: a backend computes every op with the same per-element sequence of IEEE operations
// as the CPU kernels of src/ops (on a device whose fma is exact), so results never depend on the
// backend. Where an op offers a fusion (an RMSNorm before a product, dt_proj inside the scan), a
// backend may fuse or run the pieces; both give the same bits, and the op says where the pieces'
// intermediate values go.
//
// Rounds: Model::forward brackets each round's ops with begin_round(key) and end_round(). The CPU
// executes every op at once; Vulkan records the round into one command buffer and, when the next
// round has the same key, replays the recording instead (the op calls then only stage their host
// inputs). The key must therefore name everything that changes an op's arguments.
//
// This header knows nothing of models: it depends on src/ops and src/core only.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/profile.h"
#include "core/threading.h"
#include "ops/attention.h"
#include "ops/ffn.h"
#include "ops/moe.h"
#include "ops/rope.h"
#include "ops/scan_form.h"

namespace mb {

struct WeightMatrix;

// Memory a backend allocated: host memory on the CPU, a device buffer on Vulkan. Each backend
// defines its own subclass and resolves a view into it once per op argument.
class Storage {
 public:
  virtual ~Storage() = default;
};

// Rows of f32 values in a Storage: element (r, c) lies at offset + r * ld + c (in floats). A
// vector of weights is a view with one row.
struct View {
  const Storage* storage = nullptr;
  int64_t offset = 0;
  int64_t ld = 0;

  explicit operator bool() const { return storage != nullptr; }
  // The same rows from column `column` on.
  View column(int64_t column) const { return {storage, offset + column, ld}; }
  // The rows from row `row` on.
  View row(int64_t row) const { return {storage, offset + row * ld, ld}; }
};

// A packed weight matrix held by a backend ([rows, cols] in the panels of ops/matmul.h or the
// tiles of ops/quant_matmul.h, in `dtype`).
struct Matrix {
  const Storage* storage = nullptr;
  DType dtype = DType::F32;
  int64_t rows = 0;  // outputs
  int64_t cols = 0;  // inputs
  explicit operator bool() const { return storage != nullptr; }
};

// What one sequence's recurrent state holds: a fixed region of floats (the conv and SSM states of
// every layer, laid out by the model's StateLayout) and parts that grow with the position (the
// KV caches to come), each a run of positions of the same number of floats.
struct StateShape {
  int64_t fixed_floats = 0;
  std::vector<int64_t> growing{};  // floats per position of each growing part
  bool operator==(const StateShape&) const = default;
  // Floats of the host form of a state that has consumed `positions` positions: the fixed region,
  // then each growing part's used positions.
  int64_t host_floats(int64_t positions) const;
};

// Growing parts are allocated in blocks of this many positions, so a state holds what it has used,
// rounded up to a block, never a maximum context.
inline constexpr int64_t kStateBlockPositions = 256;

// One sequence's state as a backend holds it. Its host form (download) is the fixed region
// followed by each growing part's used positions, the form state files hold.
class StateStorage {
 public:
  explicit StateStorage(StateShape shape) : shape_(std::move(shape)) {}
  virtual ~StateStorage() = default;
  StateStorage(const StateStorage&) = delete;
  StateStorage& operator=(const StateStorage&) = delete;

  const StateShape& shape() const { return shape_; }
  // Positions each growing part has room for (0 without growing parts).
  int64_t capacity() const { return capacity_; }
  // Identifies the storage's current memory: a recording that names it replays only while the id
  // is unchanged, so it changes whenever the memory is reallocated.
  uint64_t id() const { return id_; }
  // Where the memory lives: null for host memory, else a token of the device context.
  virtual const void* home() const = 0;
  // Makes room for `positions` positions in every growing part, keeping the contents.
  virtual void reserve(int64_t positions) = 0;
  // A copy in the same place (no host round trip for a device state), with room for `positions`.
  virtual std::unique_ptr<StateStorage> clone(int64_t positions) const = 0;
  // Writes the host form of a state that has consumed `positions` positions.
  virtual void download(int64_t positions, std::span<float> host) const = 0;

 protected:
  static int64_t rounded_capacity(int64_t positions);
  void set_memory(int64_t capacity);  // records a reallocation: new capacity, new id

 private:
  StateShape shape_{};
  int64_t capacity_ = 0;
  uint64_t id_ = next_id();
  static uint64_t next_id();
};

// A state in host memory: what the CPU backend computes on, and what a state file restores into.
//
// Its growing parts are lists of blocks of kStateBlockPositions positions. A position's rows are
// written once (a KV cache only appends), so a block whose positions are all used never changes
// again: clone() shares such full blocks with its copy read-only and copies only the last,
// partly used block. Live sequences forked from one cached conversation, and the prefix cache's
// entries along it, therefore hold one copy of the keys and values they have in common; each
// writes only into blocks it alone holds.
class HostState final : public StateStorage {
 public:
  explicit HostState(StateShape shape);
  // The host form `host` of a state of `positions` positions (sizes checked by the caller).
  HostState(StateShape shape, int64_t positions, std::span<const float> host);

  const void* home() const override { return nullptr; }
  void reserve(int64_t positions) override;
  std::unique_ptr<StateStorage> clone(int64_t positions) const override;
  void download(int64_t positions, std::span<float> host) const override;

  float* fixed() { return fixed_.data(); }
  const float* fixed() const { return fixed_.data(); }
  // Where position `position` of growing part `part` is written: in a block this state alone
  // holds (checked), within the capacity.
  float* writable_row(size_t part, int64_t position);
  // Growing part `part`'s rows by position, for reading ([capacity, floats per position]).
  PositionRows rows(size_t part) const;
  // Whether position block `block` of every growing part is the same memory in both states.
  bool shares_block(const HostState& other, int64_t block) const;

 private:
  // Appends zeroed blocks until every growing part has room for `positions`.
  void grow_to(int64_t positions);

  struct GrowingPart {
    std::vector<std::shared_ptr<float[]>> blocks{};  // [kStateBlockPositions, floats per position] each
    std::vector<const float*> addresses{};           // blocks[i].get(), as PositionRows takes them
  };
  // A state whose fixed region is a copy of `fixed`, written once (not zero-filled first), with
  // no growing blocks yet.
  HostState(StateShape shape, const std::vector<float>& fixed);

  std::vector<float> fixed_{};  // [shape().fixed_floats]
  std::vector<GrowingPart> growing_{};
};
// One sequence of a round: its rows of the round's activation buffers and its state. The ops
// that read and update state (conv, scans) take every part of a round at once.
struct Part {
  StateStorage* state = nullptr;
  int64_t first_row = 0;
  int64_t rows = 0;
  int64_t position = 0;  // positions the sequence consumed before this round
};

// ---- ops ----------------------------------------------------------------------------------------
// Each op mirrors a CPU op of src/ops (same names, same semantics; see those headers for the
// arithmetic), with views in place of pointers. `phase` names the op's profiling phase (an id into
// the model's phase names), which the CPU times and Vulkan labels its dispatches with.

// RMSNorm of x's rows before a product (ops/rms_norm.h over the product's inputs).
struct NormPrologue {
  View weight{};  // [cols]
  float eps = 1e-5f;
  View scratch{};     // [m, cols]: where a backend that runs the pieces puts the normalized rows
  PhaseId phase = 0;  // the norm's own phase when run as a piece
};

// ops/matmul.h: y (+)= x W^T (+ bias), or softplus of it; optionally normalizing x first.
struct MatmulOp {
  View x{};  // [m, w.cols]
  int64_t m = 0;
  Matrix w{};
  View bias{};  // [w.rows] or none
  View y{};     // [m, w.rows]
  bool accumulate = false;
  bool softplus = false;
  NormPrologue norm{};  // none when norm.weight is empty
  PhaseId phase = 0;
};

// ops/rms_norm.h over up to kMaxNormSegments disjoint column ranges of each row, each with its
// own width and weights (FalconMamba normalizes dt_low, B and C of one row this way). y may be x.
inline constexpr int kMaxNormSegments = 4;
struct NormSegment {
  int64_t column = 0;
  int64_t dim = 0;
  View weight{};  // [dim]
};
struct RmsNormOp {
  View x{};
  int64_t rows = 0;
  std::span<const NormSegment> segments{};
  float eps = 1e-5f;
  View y{};
  PhaseId phase = 0;
};

// ops/causal_conv.h over the round's parts; each part's history ([K - 1, channels] at
// state_offset of its state) is read and updated.
struct CausalConvOp {
  View x{};  // [m, channels]
  int64_t channels = 0;
  int kernel_size = 4;
  View weight{};  // [K, channels] tap-major
  View bias{};    // [channels] or none
  int64_t state_offset = 0;
  View y{};  // [m, channels]
  std::span<const Part> parts{};
  PhaseId phase = 0;
};

// ops/short_conv.h over the round's parts (LFM2's gated short convolution); each part's history
// of B * x ([K - 1, channels] at state_offset of its state) is read and updated.
struct ShortConvOp {
  View bcx{};  // [m, 3 channels]: B | C | x
  int64_t channels = 0;
  int kernel_size = 3;
  View weight{};  // [K, channels] tap-major
  int64_t state_offset = 0;
  View y{};  // [m, channels]
  std::span<const Part> parts{};
  PhaseId phase = 0;
};

// dt = softplus(dt_low W^T + bias) computed for the scan (Mamba-1's dt_proj); a backend may run
// it inside the scan or as a product into the scan's dt view first.
struct ScanDtProj {
  Matrix w{};     // [channels, rank]
  View bias{};    // [channels]
  View dt_low{};  // [m, rank]
  int64_t m = 0;  // rows of the round (every part's)
  PhaseId phase = 0;
};

// ops/selective_scan.h over the round's parts; each part's SSM state ([N, channels] at
// state_offset) is read and updated.
struct SelectiveScanOp {
  int64_t channels = 0;
  int64_t d_state = 0;
  View u{};        // [m, channels]
  View dt{};       // [m, channels] softplus applied; written first when dt_proj is given
  View b{}, c{};   // [m, N] each
  View z{};        // [m, channels] gate inputs, or none
  View a_base2{};  // [N, channels]
  View d_skip{};   // [channels]
  int64_t state_offset = 0;
  View y{};  // [m, channels]
  std::span<const Part> parts{};
  const ScanDtProj* dt_proj = nullptr;
  PhaseId phase = 0;
};

// ops/mamba2_scan.h over the round's parts (state [H, N, P] at state_offset).
struct Mamba2ScanOp {
  int64_t n_heads = 0, headdim = 0, d_state = 0, n_groups = 0;
  View dt_bias{}, a_base2{}, a{};  // [H] each
  View d_skip{};                   // [H], or [H * P] when d_skip_per_channel
  bool d_skip_per_channel = false;
  float dt_min = 0.0f, dt_max = 0.0f;
  ScanForm form = ScanForm::Sequential;
  int64_t chunk = 256;
  View xbc{};  // [m, conv width]: x | B | C
  View dt{};   // [m, H] raw dt; replaced by the clamped softplus
  View y{};    // [m, H * P]
  int64_t state_offset = 0;
  std::span<const Part> parts{};
  PhaseId phase = 0;
};

// ops/gated_delta_net.h over the round's parts (Qwen3.5 / Qwen3-Next's linear attention); each
// part's matrix state ([nv, dv, dk] at state_offset) is read and updated.
struct GatedDeltaNetOp {
  int64_t n_key_heads = 0, n_value_heads = 0, key_dim = 0, value_dim = 0;
  bool tiled_heads = false;  // value head h reads key head h % nk (llama.cpp's GGUFs), else h / (nv / nk)
  float l2_eps = 1e-6f;
  View qkv{};               // [m, conv width]: q | k | v after the conv and SiLU
  View b{}, a{};            // [m, nv] each: raw beta and decay inputs
  View a_neg{}, dt_bias{};  // [nv] each; a_neg = -exp(A_log)
  int64_t state_offset = 0;
  View y{};  // [m, nv * dv]
  std::span<const Part> parts{};
  PhaseId phase = 0;
};

// ops/gated_rms_norm.h.
struct GatedRmsNormOp {
  View y{}, z{};
  int64_t rows = 0, dim = 0, group_size = 0;
  View weight{};  // [dim] or none (the gate alone)
  float eps = 1e-5f;
  View out{};  // may be y
  PhaseId phase = 0;
};

// ops/mamba3_scan.h over the round's parts (the layer's state block at state_offset).
struct Mamba3ScanOp {
  int64_t n_heads = 0, headdim = 0, d_state = 0, n_groups = 0, n_angles = 0;
  View dt_bias{}, b_bias{}, c_bias{}, b_norm{}, c_norm{}, d_skip{};
  View gate_norm{};  // [H * P] or none
  float a_floor = 1e-4f, eps = 1e-5f;
  ScanForm form = ScanForm::Sequential;
  int64_t chunk = 64;
  bool boundary_fold = true;
  View proj{};  // [m, in_proj width], read and written
  View y{};     // [m, H * P]
  int64_t state_offset = 0;
  std::span<const Part> parts{};
  PhaseId phase = 0;
};

// Each part's rows of x, `cols` floats of each, stored in growing part `part` of the part's state
// at its positions [position, position + rows) (a KV cache's append). The state has room for them
// (Model::forward reserves it before the round).
struct AppendRowsOp {
  View x{};
  int64_t cols = 0;
  int64_t part = 0;  // index among the state's growing parts (StatePart::offset of a growing part)
  std::span<const Part> parts{};
  PhaseId phase = 0;
};

// ops/rope.h over the round's parts, in place: each part's rows of q and k rotated by their
// absolute positions (position + row), before the keys are appended to the cache.
struct RopeOp {
  int64_t head_dim = 0;
  double theta = 10000.0;
  View q{};  // [m, n_heads * head_dim]
  int64_t n_heads = 0;
  View k{};  // [m, n_kv_heads * head_dim]
  int64_t n_kv_heads = 0;
  std::span<const Part> parts{};
  PhaseId phase = 0;
  int64_t rotary_dims = 0;  // RopeParams::rotary_dims: the first channels of a head rotated; 0: all
};

// ops/attention.h over the round's parts: each part's rows of q attend to the keys and values of
// positions 0..position + row in growing parts k_part and v_part of its state, which hold the
// round's own positions already (append_rows runs first).
struct AttentionOp {
  int64_t n_heads = 0, n_kv_heads = 0, head_dim = 0;
  float scale = 1.0f;
  View q{};                        // [m, n_heads * head_dim]
  int64_t k_part = 0, v_part = 0;  // growing parts of n_kv_heads * head_dim floats per position
  View y{};                        // [m, n_heads * head_dim]
  std::span<const Part> parts{};
  PhaseId phase = 0;
};

// ops/ffn.h's glu: the activation between an MLP's products. y may be x.
struct GluOp {
  View x{};  // [rows, 2 * width] (SwiGlu: gate | up) or [rows, width]
  int64_t rows = 0, width = 0;
  Activation activation = Activation::SwiGlu;
  View y{};  // [rows, width]
  PhaseId phase = 0;
};

// ops/ffn.h's scale_rows: y = x * scale, or y += x * scale (a scaled residual branch). y may be x.
struct ScaleOp {
  View x{};
  int64_t rows = 0, cols = 0;
  float scale = 1.0f;
  bool accumulate = false;
  View y{};
  PhaseId phase = 0;
};

// ops/moe.h over m rows: the router product, each row's choice of experts and their weights, each
// chosen expert's MLP over the block of rows routed to it, and y (+)= each row's weighted sum. The
// scratch views have room for m rows each; `routes` holds the choice afterwards (the other
// scratch contents are fixed by no contract). Only the chosen experts' matrices are read.
struct MoeOp {
  MoeParams params{};
  View x{};   // [m, d_model]: what the router reads
  View xe{};  // [m, latent]: what latent experts read (params.latent > 0), or none (x)
  int64_t m = 0;
  Matrix router{};                       // [n_experts, d_model], f32
  View correction_bias{};                // [n_experts], or none
  std::span<const Matrix> up{}, down{};  // n_experts each: [up_rows, expert_dim] and [expert_dim, width]
  View y{};                              // [m, expert_dim]
  bool accumulate = false;
  View logits{};                        // [m, n_experts]
  View routes{};                        // [m, 2 top_k]: each slot's expert (as a float), then its weight
  View rows{}, hidden{}, out{}, acc{};  // [m, expert_dim], [m, up_rows], [m, expert_dim], [m, expert_dim]
  PhaseId router_phase = 0;             // the router product and the routing
  PhaseId phase = 0;                    // the experts and the sums
};

// Rows of an embedding table for token ids, widened to f32 (ops/quant.h's dequantize_row) into
// y's rows. The table stays in host memory, in its storage dtype: lookups touch a few rows.
struct EmbedOp {
  const uint8_t* table = nullptr;  // [rows, cols] in `dtype`
  DType dtype = DType::F32;
  int64_t cols = 0;
  std::span<const int32_t> tokens{};
  View y{};  // [tokens, cols]
  PhaseId phase = 0;
};

// Host floats [rows, cols] into y's rows (the feature rows of a sequence model).
struct WriteRowsOp {
  const float* host = nullptr;
  int64_t rows = 0, cols = 0;
  View y{};
  PhaseId phase = 0;
};

// ops/argmax.h per row, as a float index into y[row].
struct ArgmaxOp {
  View x{};
  int64_t rows = 0, cols = 0;
  View y{};
  PhaseId phase = 0;
};

enum class OpKind {
  Matmul,
  RmsNorm,
  CausalConv,
  SelectiveScan,
  Mamba2Scan,
  GatedRmsNorm,
  Mamba3Scan,
  Argmax,
  AppendRows,
  Attention,
  Rope,
  Glu,
  Scale,
  Moe,
  ShortConv,
  GatedDeltaNet
};
const char* op_kind_name(OpKind kind);

// An op and the parameters a backend's support depends on.
struct OpQuery {
  OpKind kind{};
  DType dtype = DType::F32;  // the weights' storage dtype (Matmul; Moe: the experts')
  int64_t size = 0;          // the state size (scans), the kernel size (conv)
};

// How a buffer of a Stream is reached from the host.
enum class Access {
  Device,    // written and read by ops only
  HostRead,  // outputs the host reads with read_rows after end_round
};

// Device time of one phase, summed over its dispatches.
struct PhaseTime {
  PhaseId phase = 0;
  double milliseconds = 0.0;
  int64_t dispatches = 0;
};

// One caller's execution state on a backend: activation buffers that grow to the largest round
// and are then reused (a steady decode loop allocates nothing), and a backend's recordings.
class Stream {
 public:
  virtual ~Stream() = default;
  // Buffer number `slot`, with room for rows x width floats; a view of its rows (ld = width).
  // Growing a buffer keeps nothing. Call between rounds only.
  virtual View buffer(int slot, int64_t rows, int64_t width, Access access) = 0;
  // Bytes of the buffers held.
  virtual size_t bytes() const = 0;

  // Device time per phase of the rounds run since the caller last cleared it (a backend that
  // measures nothing leaves it empty).
  std::vector<PhaseTime> timings{};
};

class Backend {
 public:
  virtual ~Backend() = default;
  // "cpu", "vulkan:0 (llvmpipe ..., Mesa ...)".
  virtual std::string description() const = 0;
  // Why the backend cannot run `query`, or "" when it can. Models ask at load, for every op of
  // every block, so an unsupported case is an error naming it rather than a failure mid-forward.
  virtual std::string why_unsupported(const OpQuery& query) const = 0;

  // Weights. The returned storage belongs to the caller and may outlive nothing it was made from
  // on the CPU, which reads the host memory in place; devices copy it.
  virtual std::unique_ptr<Storage> upload_matrix(const WeightMatrix& host) const = 0;
  virtual std::unique_ptr<Storage> upload_floats(const float* host, int64_t count) const = 0;
  // A new state of `shape`, zero-filled, in this backend's memory.
  virtual std::unique_ptr<StateStorage> new_state(const StateShape& shape) const = 0;
  // The same contents in this backend's memory (host form `host` of `positions` positions).
  virtual std::unique_ptr<StateStorage> adopt_state(const StateShape& shape, int64_t positions,
                                                    std::span<const float> host) const = 0;
  // The token of this backend's state memory (StateStorage::home()).
  virtual const void* state_home() const = 0;

  virtual std::unique_ptr<Stream> new_stream() const = 0;
  // Whether `stream` was made by this backend (a workspace moved between models gets a new one).
  virtual bool owns(const Stream& stream) const = 0;

  // Every op between begin_round and end_round belongs to the round; end_round runs it (the CPU
  // has run each op already). A round whose ops threw is ended with cancel_round instead.
  virtual void begin_round(Stream& stream, const ComputeContext& ctx,
                           std::span<const uint64_t> key) const = 0;
  virtual void end_round(Stream& stream) const = 0;
  virtual void cancel_round(Stream& stream) const = 0;
  // After end_round: rows x cols floats of `from` (a HostRead buffer) into host memory.
  virtual void read_rows(Stream& stream, View from, int64_t rows, int64_t cols, float* host) const = 0;

  virtual void matmul(Stream& stream, const MatmulOp& op) const = 0;
  virtual void rms_norm(Stream& stream, const RmsNormOp& op) const = 0;
  virtual void causal_conv(Stream& stream, const CausalConvOp& op) const = 0;
  virtual void selective_scan(Stream& stream, const SelectiveScanOp& op) const = 0;
  virtual void mamba2_scan(Stream& stream, const Mamba2ScanOp& op) const = 0;
  virtual void gated_rms_norm(Stream& stream, const GatedRmsNormOp& op) const = 0;
  virtual void mamba3_scan(Stream& stream, const Mamba3ScanOp& op) const = 0;
  virtual void embed(Stream& stream, const EmbedOp& op) const = 0;
  virtual void write_rows(Stream& stream, const WriteRowsOp& op) const = 0;
  virtual void argmax(Stream& stream, const ArgmaxOp& op) const = 0;
  virtual void append_rows(Stream& stream, const AppendRowsOp& op) const = 0;
  virtual void attention(Stream& stream, const AttentionOp& op) const = 0;
  virtual void rope(Stream& stream, const RopeOp& op) const = 0;
  virtual void glu(Stream& stream, const GluOp& op) const = 0;
  virtual void scale(Stream& stream, const ScaleOp& op) const = 0;
  virtual void moe(Stream& stream, const MoeOp& op) const = 0;
  virtual void short_conv(Stream& stream, const ShortConvOp& op) const = 0;
  virtual void gated_delta_net(Stream& stream, const GatedDeltaNetOp& op) const = 0;
};

}  // namespace mb

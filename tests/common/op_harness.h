// SPDX-License-Identifier: MIT
// The harness the op-case registry (op_cases.h) runs on: a case declares its buffers, weights and
// states from host values, issues its ops through the Backend interface only, and computes the
// same result with the double references of src/ops; the harness runs it on any backend and
// compares what every float holds afterwards.
//
// Each activation buffer is a Stream buffer (Access::HostRead, which both backends can read
// back) holding one view of rows at an offset, with a row stride that may exceed the width; all
// of the buffer outside the view's rows holds kPadding. The first round writes every buffer's
// initial contents with the write_rows op; after the last round every buffer is read back with
// read_rows and every state downloaded. A case declares which floats its ops write and how each
// is checked (Check); every other float must still hold its initial bits, so a write outside a
// view, into a gap between parts or into an input shows, and reading kPadding (a huge value)
// into a result shows as a wrong result.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "backends/backend.h"
#include "core/dtype.h"
#include "core/threading.h"
#include "ops/matmul.h"

namespace mb::test {

// Every float of a buffer outside its view, and of a weight vector before its offset.
inline constexpr float kPadding = 1.0e30f;
// Mamba-3's RoPE phases are compared on the circle, within this many radians.
inline constexpr double kAngleTolerance = 1e-4;

// How the floats an op writes are checked against the reference run and the baseline backend
// (the CPU's scalar kernels on one thread, which every backend with an exact fma equals).
enum class Check {
  Nmse,     // within the case's NMSE of the reference, and the baseline's bits
  Exact,    // the reference's bits (copies, indices, dequantized rows), so every backend's too
  Angles,   // phases: the reference's within kAngleTolerance on the circle, and the baseline's bits
  Bits,     // a by-product the references do not compute: the baseline's bits only
  Scratch,  // contents no contract fixes (a backend that fuses never writes them): not checked
};

// A view of rows in a buffer: element (r, c) at offset + r * ld + c.
struct Rows {
  int64_t offset = 0;
  int64_t rows = 1;
  int64_t cols = 0;
  int64_t ld = 0;  // 0 means cols
};

// Floats an op writes, inside a buffer or a state's host form.
struct Region {
  std::string what;
  Rows rows;
  Check check = Check::Nmse;
};

// One buffer or state after a run: what it held before the first round and after the last.
struct Contents {
  std::string name;
  Rows view{};  // a buffer's view (a state's host form has none)
  std::vector<float> initial, final;
  std::vector<Region> regions;
};

// Everything a run of a case leaves, in the case's declaration order (the same on every run).
struct OpRecord {
  std::vector<Contents> contents;
  std::vector<std::pair<size_t, size_t>> same_bits;  // contents that must hold equal bits
};

struct TensorId {
  size_t index;
};
struct WeightsId {
  size_t index;
};
struct MatrixId {
  size_t index;
};
struct StateId {
  size_t index;
};

// One run of a case: on a backend, or the reference run (no backend) in which the case's
// reference computation updates host copies of the initial contents.
class OpRun {
 public:
  OpRun(const Backend* backend, const ComputeContext& ctx);
  ~OpRun();
  OpRun(const OpRun&) = delete;
  OpRun& operator=(const OpRun&) = delete;

  bool is_reference() const { return backend_ == nullptr; }

  // ---- declarations (made in the same order on every run) ----
  // A buffer whose view `rows` holds `values` ([rows.rows, rows.cols], row-major).
  TensorId tensor(std::string name, Rows rows, const std::vector<float>& values);
  // Rows [first_row, first_row + rows) of t's view (columns [column, column + cols) of them; all
  // of them when cols < 0) are written by the ops.
  void writes(TensorId t, Check check, int64_t first_row, int64_t rows, int64_t column = 0, int64_t cols = -1,
              std::string what = "");
  void writes(TensorId t, Check check);  // the whole view
  // A weight vector: `offset` floats of kPadding, then `values`.
  WeightsId weights(const std::vector<float>& values, int64_t offset = 0);
  // A [rows, cols] matrix of `values` stored in `dtype`, packed as a model packs it at load:
  // float dtypes rounded by pack_weights, quantized ones written as GGML blocks by quantize_row and
  // packed by pack_quantized (as from a GGUF file).
  MatrixId matrix(DType dtype, int64_t rows, int64_t cols, const std::vector<float>& values);
  // A state adopted from its host form `host` of `positions` positions; its growing parts are
  // reserved for `positions_after`, the positions downloaded after the last round.
  StateId state(std::string name, const StateShape& shape, int64_t positions, int64_t positions_after,
                std::vector<float> host);
  // Floats [offset, offset + count) of the state's host form are written by the ops.
  void writes(StateId s, Check check, int64_t offset, int64_t count, std::string what = "");
  // Two buffers (or states) whose final contents must hold the same bits on any backend.
  void same_bits(TensorId a, TensorId b);
  void same_bits(StateId a, StateId b);
  void same_bits(const std::vector<StateId>& a, const std::vector<StateId>& b);  // pairwise

  // ---- the ops ----
  // Backend runs: one round of ops (the first also writes every buffer's initial contents).
  void round(const std::function<void(const Backend&, Stream&)>& ops);
  // The reference run: computes the expected contents through the host() pointers.
  void reference(const std::function<void()>& compute);

  // Inside round(): the backend's objects.
  View view(TensorId t) const;
  View view(WeightsId w) const;
  Matrix matrix(MatrixId m) const;
  StateStorage* storage(StateId s) const;
  // Inside reference(): the host copies (the first element of a view, a state's host form).
  float* host(TensorId t);
  const float* host(WeightsId w) const;
  WeightMatrix host(MatrixId m) const;
  float* host(StateId s);
  const Rows& rows(TensorId t) const;

  // After the case's body: reads every buffer back and downloads every state.
  OpRecord finish();

 private:
  // A buffer or a state: what the backend holds for record_.contents[i].
  struct Item {
    bool is_state = false;
    Rows rows{};    // a buffer's view
    View buffer{};  // the whole buffer, in backend runs
    StateShape shape{};
    int64_t positions = 0, positions_after = 0;
    std::unique_ptr<StateStorage> storage{};
  };
  size_t add(std::string name, std::vector<float> initial, Item item);
  void start();

  const Backend* backend_;
  ComputeContext ctx_;
  std::unique_ptr<Stream> stream_;
  std::vector<Item> items_;  // parallel to record_.contents
  OpRecord record_;
  // Deques keep their elements in place: the CPU backend reads uploaded host memory where it lies.
  std::deque<std::vector<float>> vectors_;
  std::vector<int64_t> vector_offsets_;
  std::deque<std::vector<uint8_t>> packed_;
  std::vector<WeightMatrix> matrices_;
  std::vector<std::unique_ptr<Storage>> vector_storage_, matrix_storage_;  // backend runs
  int64_t rounds_ = 0;
};

// ---- batched ops (parts of a round) ----
// Rows of `lengths` parts laid out in reverse order with one unused row before each, so no part's
// rows follow the previous part's: part i's rows start at the returned first_rows[i].
struct PartRows {
  std::vector<int64_t> lengths, first_rows;
  int64_t total_rows = 0;
};
PartRows part_rows(const std::vector<int64_t>& lengths);
// More parts than one Vulkan dispatch takes (vulkan::kMaxGpuParts = 16), of 1 to 3 rows.
std::vector<int64_t> many_parts();
// "parts=5,1,17", or "parts=19x(1..3)" for many_parts().
std::string describe_parts(const std::vector<int64_t>& lengths);
std::string join(const std::vector<int64_t>& values);

// Floats of a state's fixed region an op writes.
struct StateRegion {
  int64_t offset, count;
  Check check;
  std::string what;
};
// One state per part (`fixed_floats` floats, no growing parts) holding initial(part), with the
// regions `written`.
std::vector<StateId> part_states(OpRun& run, const std::string& name, const PartRows& layout,
                                 int64_t fixed_floats, const std::vector<StateRegion>& written,
                                 const std::function<std::vector<float>(size_t part)>& initial);
// Declares the rows of every part of t as written with `check`.
void writes_parts(OpRun& run, TensorId t, const PartRows& layout, Check check);
// The ways a batched case runs its positions: all in one round (piece 0) and, when `piece` > 0,
// also `piece` positions of each part per round, whose results must hold the first way's bits.
std::vector<int64_t> ways_to_run(int64_t piece);
// Issues `op` on the parts, the states carried between rounds: with piece 0 in one round; else in
// rounds of `piece` positions of each part, as decode steps follow one another.
void run_parts(OpRun& run, const PartRows& layout, const std::vector<StateId>& states, int64_t piece,
               const std::function<void(const Backend&, Stream&, std::span<const Part>)>& op);

// Runs a case's body on `backend` (the reference run when null) and returns what it left.
OpRecord run_op(const std::function<void(OpRun&)>& body, const Backend* backend, const ComputeContext& ctx);

// Adds a gtest failure, naming `on` and the float, for every check `got` fails: floats outside
// the declared regions that changed, regions that miss the reference run `reference` (Nmse
// regions by more than `tolerance`), and, with a baseline, any float outside Scratch regions
// whose bits differ from the baseline's. Returns the worst NMSE over the Nmse regions.
double expect_record(const OpRecord& got, const OpRecord& reference, const OpRecord* baseline,
                     double tolerance, const std::string& on);

}  // namespace mb::test

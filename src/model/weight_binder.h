// SPDX-License-Identifier: MIT
// Binds checkpoint tensors to the engine's weight structs by name, checking each shape against
// the one the config implies. Matrices are packed once into the panel layout of ops/matmul.h
// (ops/quant_matmul.h for quantized dtypes), in the requested storage dtype (never widened to f32
// wholesale; a matrix whose rows are not whole blocks of a quantized dtype falls back as
// storable_dtype says). Small vectors (norms, biases, A, D) become f32 copies.
#pragma once

#include <deque>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "core/progress.h"
#include "io/safetensors.h"
#include "ops/matmul.h"

namespace mb {

class WeightBinder {
 public:
  // `matrix_dtype`: storage for matrices; empty = as stored in the checkpoint.
  WeightBinder(const TensorSet& tensors, std::optional<DType> matrix_dtype)
      : tensors_(tensors), matrix_dtype_(matrix_dtype) {}

  bool has(const std::string& name) const { return tensors_.find(name) != nullptr; }
  // The stored shape of `name` (empty when the checkpoint has no such tensor).
  std::vector<int64_t> shape_of(const std::string& name) const;
  // The first of `names` the checkpoint holds, or the first name when none is present.
  std::string first_present(std::initializer_list<std::string> names) const;

  // A checkpoint read from a GGUF file may hold a tensor as its two halves (gguf_half_name, for
  // Granite's fused [gate; up] matrices): matrix(), experts() and f32() then join them, the halves' rows one
  // after the other (per leading index, for a 3-D tensor), in their stored dtype when the two
  // share it, else in f32 (exactly their values). A joined matrix exists only while it is packed.
  // A name bound a second time (a weight several blocks share) gives the first result again.
  WeightMatrix matrix(const std::string& name, int64_t rows, int64_t cols);
  // The same, packed in `dtype` whatever the requested matrix dtype (a MoE router, in f32).
  WeightMatrix matrix(const std::string& name, int64_t rows, int64_t cols, DType dtype);
  // The [rows, cols] matrix `name` with its rows reordered before packing: row i of the result
  // is stored row order[i] (Qwen3.5's q_proj, per head [query | gate], bound as all queries then
  // all gates). Stored rows are whole blocks of any dtype, so the rows move as bytes.
  WeightMatrix matrix_in_row_order(const std::string& name, int64_t rows, int64_t cols,
                                   const std::vector<int64_t>& order);
  // `experts` matrices of [rows, cols], each packed on its own: one 2-D tensor per expert, named
  // expert_name with "{e}" for its index, where expert_name is given and the checkpoint holds
  // expert 0's; else the stacked 3-D tensor `name` [experts, rows, cols] (or its two halves).
  // With `expert_second_name`, each expert's per-expert tensor is two halves of rows / 2 (the
  // first under expert_name), joined as a GGUF file's halves are.
  std::vector<WeightMatrix> experts(const std::string& name, const std::string& expert_name, int64_t experts,
                                    int64_t rows, int64_t cols, const std::string& expert_second_name = "");
  // `experts` matrices of [2 half_rows, cols], each joined from two 2-D tensors per expert (rows of
  // first_name, then of second_name; "{e}" the expert's index: LFM2-MoE's hub files keep each
  // expert's gate w1 and up w3 apart) and packed on its own, in f32 where their dtypes differ.
  std::vector<WeightMatrix> joined_experts(const std::string& first_name, const std::string& second_name,
                                           int64_t experts, int64_t half_rows, int64_t cols);
  // The stored [rows, cols] tensor, whose row count may be any of `allowed_rows`.
  const StoredTensor& tensor_rows_in(const std::string& name, const std::vector<int64_t>& allowed_rows,
                                     int64_t cols);
  // Packs the first `rows` rows of a bound 2-D tensor (the LM head skips padded vocab rows).
  WeightMatrix packed_rows(const StoredTensor& tensor, int64_t rows);
  // `tensor` itself, or, when the requested matrix dtype is quantized, a copy of it quantized row
  // by row into GGML blocks (the embedding: looked up by row, and packed as a tied LM head).
  const StoredTensor& quantized_rows(const StoredTensor& tensor);
  // An f32 copy of a tensor whose shape must equal `shape` (one copy however often it is bound).
  const float* f32(const std::string& name, const std::vector<int64_t>& shape);
  const float* f32_if_present(const std::string& name, const std::vector<int64_t>& shape);
  // A depthwise conv1d weight stored [channels, 1, K], re-laid out tap-major [K, channels] so the
  // conv kernel reads sixteen channels per load.
  const float* conv_taps(const std::string& name, int64_t channels, int64_t kernel_size);
  // Keeps `values` alive for the lifetime of the binder and returns its data.
  const float* keep(std::vector<float> values);

  const std::set<std::string>& used() const { return used_; }
  // Bytes of every packed matrix so far: what a decode step streams through the kernels.
  size_t packed_matrix_bytes() const { return packed_matrix_bytes_; }
  // Frees the packed matrices (every WeightMatrix this binder returned dangles afterwards): for a
  // model whose forward runs on a device that holds its own copy.
  void release_packed_matrices() {
    packed_matrices_.clear();
    bound_matrices_.clear();
  }
  // Bytes of packed matrices still held in host memory.
  size_t resident_packed_bytes() const;
  // Reports the bytes of the checkpoint's tensors as each is bound (packed, quantized, copied) to
  // `progress` (nullptr: stops reporting; it must outlive the reporting).
  void report_progress_to(ProgressLine* progress);

 private:
  const StoredTensor& require(const std::string& name, const std::vector<int64_t>& shape);
  WeightMatrix pack_matrix(const std::string& name, int64_t rows, int64_t cols);
  const float* copy_f32(const std::string& name, const std::vector<int64_t>& shape);
  // Drops the pages of a tensor that has been copied, and reports it.
  void finished(const StoredTensor& tensor);
  // Packs [rows, cols] of `tensor`'s dtype starting at `data` in `target`.
  WeightMatrix pack(const StoredTensor& tensor, const uint8_t* data, int64_t rows, int64_t cols,
                    DType target);
  bool has_halves(const std::string& name) const;
  // The two halves of `name`, joined into `bytes`; returns their dtype (F32 when they differ).
  DType join_halves(const std::string& name, const std::vector<int64_t>& shape, std::vector<uint8_t>& bytes);
  // The same for halves stored under `first` and `second`, reported as `name`.
  DType join_halves(const std::string& name, const std::string& first, const std::string& second,
                    const std::vector<int64_t>& shape, std::vector<uint8_t>& bytes);
  // Packs `rows` x `cols` bytes of `dtype`.
  WeightMatrix pack_joined(const std::vector<uint8_t>& bytes, DType dtype, int64_t rows, int64_t cols);

  const TensorSet& tensors_;
  std::optional<DType> matrix_dtype_;
  std::deque<std::vector<uint8_t>> owned_bytes_;
  std::deque<std::vector<uint8_t>> packed_matrices_;  // matrix() and packed_rows() results
  std::deque<std::vector<float>> owned_floats_;
  std::deque<StoredTensor> owned_tensors_;
  std::set<std::string> used_;
  std::map<std::string, WeightMatrix> bound_matrices_;  // matrix(name, rows, cols) results
  std::map<std::string, std::pair<std::vector<int64_t>, const float*>> bound_vectors_;  // f32() results
  size_t packed_matrix_bytes_ = 0;
  ProgressLine* progress_ = nullptr;
  std::set<std::string> reported_;  // the tensors already counted in progress_
};

std::string shape_string(const std::vector<int64_t>& shape);

// Refuses tensors of layers the config does not have: a checkpoint with more layers than the
// config says is malformed, not something to run partially.
void check_layer_indices(const TensorSet& tensors, int64_t n_layer);

}  // namespace mb

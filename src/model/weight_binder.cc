// SPDX-License-Identifier: MIT
#include "model/weight_binder.h"

#include <omp.h>

#include <cstring>

#include "core/error.h"
#include "model/weight_schema.h"
#include "ops/matmul.h"
#include "ops/quant.h"
#include "ops/quant_matmul.h"

namespace mb {

std::string shape_string(const std::vector<int64_t>& shape) {
  std::string text = "[";
  for (size_t i = 0; i < shape.size(); ++i) text += (i ? ", " : "") + std::to_string(shape[i]);
  return text + "]";
}

std::vector<int64_t> WeightBinder::shape_of(const std::string& name) const {
  const StoredTensor* tensor = tensors_.find(name);
  return tensor != nullptr ? tensor->shape : std::vector<int64_t>{};
}

std::string WeightBinder::first_present(std::initializer_list<std::string> names) const {
  for (const auto& name : names)
    if (has(name)) return name;
  return *names.begin();
}

const StoredTensor& WeightBinder::require(const std::string& name, const std::vector<int64_t>& shape) {
  const StoredTensor* tensor = tensors_.find(name);
  if (tensor == nullptr)
    throw Error("checkpoint is missing tensor '" + name + "' (expected shape " + shape_string(shape) + ")");
  if (tensor->shape != shape) {
    throw Error("tensor '" + name + "' has shape " + tensor->shape_string() + " but the config implies " +
                shape_string(shape));
  }
  if (!tensor->dtype) {
    throw Error("tensor '" + name + "' has dtype " + tensor->dtype_string +
                "; weights must be F32, BF16 or F16");
  }
  used_.insert(name);
  return *tensor;
}

void check_layer_indices(const TensorSet& tensors, int64_t n_layer) {
  for (const auto& [name, tensor] : tensors.tensors()) {
    // The Mamba families' and Nemotron-H's layers, or Granite-4.0-H's (named as Llama's).
    std::string prefix = "backbone.layers.";
    if (name.rfind(prefix, 0) != 0) prefix = "model.layers.";
    if (name.rfind(prefix, 0) != 0) continue;
    const size_t end = name.find('.', prefix.size());
    const std::string index_text = name.substr(prefix.size(), end - prefix.size());
    char* parse_end = nullptr;
    const long long index = std::strtoll(index_text.c_str(), &parse_end, 10);
    if (index_text.empty() || *parse_end != '\0' || index < 0 || index >= n_layer)
      throw Error("checkpoint tensor '" + name + "' belongs to a layer outside the config's " +
                  std::to_string(n_layer) + " layers");
  }
}

WeightMatrix WeightBinder::pack(const StoredTensor& tensor, const uint8_t* data, int64_t rows, int64_t cols,
                                DType target) {
  packed_matrices_.push_back(pack_weights(data, *tensor.dtype, rows, cols, target));
  packed_matrix_bytes_ += packed_matrices_.back().size();
  return {packed_matrices_.back().data(), target, rows, cols};
}

bool WeightBinder::has_halves(const std::string& name) const {
  return !has(name) && has(gguf_half_name(name, 0)) && has(gguf_half_name(name, 1));
}

DType WeightBinder::join_halves(const std::string& name, const std::vector<int64_t>& shape,
                                std::vector<uint8_t>& bytes) {
  return join_halves(name, gguf_half_name(name, 0), gguf_half_name(name, 1), shape, bytes);
}

WeightMatrix WeightBinder::pack_joined(const std::vector<uint8_t>& bytes, DType dtype, int64_t rows,
                                       int64_t cols) {
  const DType target = storable_dtype(matrix_dtype_.value_or(dtype), cols);
  packed_matrices_.push_back(pack_weights(bytes.data(), dtype, rows, cols, target));
  packed_matrix_bytes_ += packed_matrices_.back().size();
  return {packed_matrices_.back().data(), target, rows, cols};
}

DType WeightBinder::join_halves(const std::string& name, const std::string& first, const std::string& second,
                                const std::vector<int64_t>& shape, std::vector<uint8_t>& bytes) {
  // The halves split the second-to-last dim (the only one of a vector); leading dims (experts)
  // are whole.
  const size_t split = shape.size() >= 2 ? shape.size() - 2 : 0;
  std::vector<int64_t> half_shape = shape;
  half_shape[split] /= 2;
  if (half_shape[split] * 2 != shape[split])
    throw Error("tensor '" + name + "' has an odd extent " + std::to_string(shape[split]) +
                " to split in halves");
  const StoredTensor* halves[2] = {&require(first, half_shape), &require(second, half_shape)};
  const DType dtype = *halves[0]->dtype == *halves[1]->dtype ? *halves[0]->dtype : DType::F32;
  int64_t outer = 1;
  for (size_t i = 0; i < split; ++i) outer *= shape[i];
  const int64_t cols = split + 1 < shape.size() ? shape.back() : 1;
  const int64_t half_rows = half_shape[split];
  const size_t half_bytes = static_cast<size_t>(half_rows) * dtype_row_bytes(dtype, cols);
  bytes.resize(2 * static_cast<size_t>(outer) * half_bytes);
  std::vector<float> row;
  for (int64_t o = 0; o < outer; ++o)
    for (int h = 0; h < 2; ++h) {
      const StoredTensor& source = *halves[h];
      uint8_t* out = bytes.data() + (2 * o + h) * half_bytes;
      const size_t source_bytes = static_cast<size_t>(half_rows) * dtype_row_bytes(*source.dtype, cols);
      const uint8_t* in = source.data + o * source_bytes;
      if (*source.dtype == dtype) {
        std::memcpy(out, in, half_bytes);
        continue;
      }
      row.resize(static_cast<size_t>(half_rows * cols));
      dequantize_row(*source.dtype, in, half_rows * cols, row.data());
      std::memcpy(out, row.data(), half_bytes);
    }
  for (const StoredTensor* half : halves) finished(*half);
  return dtype;
}

WeightMatrix WeightBinder::matrix(const std::string& name, int64_t rows, int64_t cols) {
  // A tensor several blocks bind (Zamba2's shared transformer blocks) is packed once.
  const auto bound = bound_matrices_.find(name);
  if (bound != bound_matrices_.end() && bound->second.rows == rows && bound->second.cols == cols)
    return bound->second;
  const WeightMatrix w = pack_matrix(name, rows, cols);
  bound_matrices_[name] = w;
  return w;
}

WeightMatrix WeightBinder::pack_matrix(const std::string& name, int64_t rows, int64_t cols) {
  if (has_halves(name)) {
    std::vector<uint8_t> joined;
    const DType dtype = join_halves(name, {rows, cols}, joined);
    const DType target = storable_dtype(matrix_dtype_.value_or(dtype), cols);
    packed_matrices_.push_back(pack_weights(joined.data(), dtype, rows, cols, target));
    packed_matrix_bytes_ += packed_matrices_.back().size();
    return {packed_matrices_.back().data(), target, rows, cols};
  }
  const StoredTensor& tensor = require(name, {rows, cols});
  const WeightMatrix w =
      pack(tensor, tensor.data, rows, cols, storable_dtype(matrix_dtype_.value_or(*tensor.dtype), cols));
  finished(tensor);
  return w;
}

WeightMatrix WeightBinder::matrix_in_row_order(const std::string& name, int64_t rows, int64_t cols,
                                               const std::vector<int64_t>& order) {
  MB_CHECK(static_cast<int64_t>(order.size()) == rows);
  const StoredTensor& tensor = require(name, {rows, cols});
  const size_t row_bytes = tensor.byte_size / static_cast<size_t>(rows);
  std::vector<uint8_t> bytes(tensor.byte_size);
  for (int64_t i = 0; i < rows; ++i)
    std::memcpy(bytes.data() + static_cast<size_t>(i) * row_bytes,
                tensor.data + static_cast<size_t>(order[static_cast<size_t>(i)]) * row_bytes, row_bytes);
  const WeightMatrix w =
      pack(tensor, bytes.data(), rows, cols, storable_dtype(matrix_dtype_.value_or(*tensor.dtype), cols));
  finished(tensor);
  return w;
}

WeightMatrix WeightBinder::matrix(const std::string& name, int64_t rows, int64_t cols, DType dtype) {
  const StoredTensor& tensor = require(name, {rows, cols});
  const WeightMatrix w = pack(tensor, tensor.data, rows, cols, dtype);
  finished(tensor);
  return w;
}

std::vector<WeightMatrix> WeightBinder::experts(const std::string& name, const std::string& expert_name,
                                                int64_t experts, int64_t rows, int64_t cols,
                                                const std::string& expert_second_name) {
  std::vector<WeightMatrix> out;
  const bool per_expert =
      !expert_name.empty() && (has(expert_tensor_name(expert_name, 0)) || (!has(name) && !has_halves(name)));
  if (per_expert && !expert_second_name.empty()) {
    for (int64_t e = 0; e < experts; ++e) {
      std::vector<uint8_t> joined;
      const std::string first = expert_tensor_name(expert_name, e);
      const DType dtype =
          join_halves(first, first, expert_tensor_name(expert_second_name, e), {rows, cols}, joined);
      out.push_back(pack_joined(joined, dtype, rows, cols));
    }
    return out;
  }
  if (per_expert) {
    for (int64_t e = 0; e < experts; ++e)
      out.push_back(matrix(expert_tensor_name(expert_name, e), rows, cols));
    return out;
  }
  if (has_halves(name)) {
    // llama.cpp's files split Granite's [gate; up] experts into ffn_gate_exps and ffn_up_exps:
    // joined per expert, as each expert's rows are gate then up.
    std::vector<uint8_t> joined;
    const DType dtype = join_halves(name, {experts, rows, cols}, joined);
    const DType target = storable_dtype(matrix_dtype_.value_or(dtype), cols);
    const size_t expert_bytes = static_cast<size_t>(rows) * dtype_row_bytes(dtype, cols);
    for (int64_t e = 0; e < experts; ++e) {
      packed_matrices_.push_back(pack_weights(joined.data() + e * expert_bytes, dtype, rows, cols, target));
      packed_matrix_bytes_ += packed_matrices_.back().size();
      out.push_back({packed_matrices_.back().data(), target, rows, cols});
    }
    return out;
  }
  const StoredTensor& tensor = require(name, {experts, rows, cols});
  const DType target = storable_dtype(matrix_dtype_.value_or(*tensor.dtype), cols);
  const size_t expert_bytes = static_cast<size_t>(rows) * dtype_row_bytes(*tensor.dtype, cols);
  for (int64_t e = 0; e < experts; ++e)
    out.push_back(pack(tensor, tensor.data + e * expert_bytes, rows, cols, target));
  finished(tensor);
  return out;
}

std::vector<WeightMatrix> WeightBinder::joined_experts(const std::string& first_name,
                                                       const std::string& second_name, int64_t experts,
                                                       int64_t half_rows, int64_t cols) {
  std::vector<WeightMatrix> out;
  std::vector<uint8_t> joined;
  std::vector<float> row;
  for (int64_t e = 0; e < experts; ++e) {
    const StoredTensor* halves[2] = {&require(expert_tensor_name(first_name, e), {half_rows, cols}),
                                     &require(expert_tensor_name(second_name, e), {half_rows, cols})};
    const DType dtype = *halves[0]->dtype == *halves[1]->dtype ? *halves[0]->dtype : DType::F32;
    const size_t half_bytes = static_cast<size_t>(half_rows) * dtype_row_bytes(dtype, cols);
    joined.resize(2 * half_bytes);
    for (int h = 0; h < 2; ++h) {
      const StoredTensor& source = *halves[h];
      if (*source.dtype == dtype) {
        std::memcpy(joined.data() + h * half_bytes, source.data, half_bytes);
        continue;
      }
      row.resize(static_cast<size_t>(half_rows * cols));
      dequantize_row(*source.dtype, source.data, half_rows * cols, row.data());
      std::memcpy(joined.data() + h * half_bytes, row.data(), half_bytes);
    }
    const DType target = storable_dtype(matrix_dtype_.value_or(dtype), cols);
    packed_matrices_.push_back(pack_weights(joined.data(), dtype, 2 * half_rows, cols, target));
    packed_matrix_bytes_ += packed_matrices_.back().size();
    out.push_back({packed_matrices_.back().data(), target, 2 * half_rows, cols});
    for (const StoredTensor* half : halves) finished(*half);
  }
  return out;
}

WeightMatrix WeightBinder::packed_rows(const StoredTensor& tensor, int64_t rows) {
  const DType target = storable_dtype(matrix_dtype_.value_or(*tensor.dtype), tensor.shape[1]);
  packed_matrices_.push_back(pack_weights(tensor.data, *tensor.dtype, rows, tensor.shape[1], target));
  packed_matrix_bytes_ += packed_matrices_.back().size();
  finished(tensor);
  return {packed_matrices_.back().data(), target, rows, tensor.shape[1]};
}

void WeightBinder::report_progress_to(ProgressLine* progress) {
  progress_ = progress;
  if (progress_ == nullptr) return;
  uint64_t total = 0;
  for (const auto& [name, tensor] : tensors_.tensors()) total += tensor.byte_size;
  progress_->start("", total, ProgressUnit::Bytes);
}

void WeightBinder::finished(const StoredTensor& tensor) {
  tensors_.release_pages(tensor);
  // A tensor bound twice (the tied LM head packs the embedding's rows) counts once.
  if (progress_ != nullptr && reported_.insert(tensor.name).second) progress_->advance(tensor.byte_size);
}

size_t WeightBinder::resident_packed_bytes() const {
  size_t bytes = 0;
  for (const std::vector<uint8_t>& matrix : packed_matrices_) bytes += matrix.size();
  return bytes;
}

const StoredTensor& WeightBinder::tensor_rows_in(const std::string& name,
                                                 const std::vector<int64_t>& allowed_rows, int64_t cols) {
  const StoredTensor* tensor = tensors_.find(name);
  if (tensor != nullptr && tensor->shape.size() == 2) {
    for (int64_t rows : allowed_rows)
      if (tensor->shape[0] == rows) return require(name, {rows, cols});
  }
  return require(name, {allowed_rows.front(), cols});  // reports the missing or misshaped tensor
}

const float* WeightBinder::f32(const std::string& name, const std::vector<int64_t>& shape) {
  const auto bound = bound_vectors_.find(name);
  if (bound != bound_vectors_.end() && bound->second.first == shape) return bound->second.second;
  const float* values = copy_f32(name, shape);
  bound_vectors_[name] = {shape, values};
  return values;
}

const float* WeightBinder::copy_f32(const std::string& name, const std::vector<int64_t>& shape) {
  if (has_halves(name)) {
    std::vector<uint8_t> joined;
    const DType dtype = join_halves(name, shape, joined);
    int64_t count = 1;
    for (int64_t extent : shape) count *= extent;
    std::vector<float> values(static_cast<size_t>(count));
    dequantize_row(dtype, joined.data(), count, values.data());
    return keep(std::move(values));
  }
  const StoredTensor& tensor = require(name, shape);
  const size_t count = static_cast<size_t>(tensor.element_count());
  std::vector<float> values(count);
  dequantize_row(*tensor.dtype, tensor.data, static_cast<int64_t>(count), values.data());
  finished(tensor);
  return keep(std::move(values));
}

const StoredTensor& WeightBinder::quantized_rows(const StoredTensor& tensor) {
  if (!matrix_dtype_ || !dtype_is_quantized(*matrix_dtype_) || tensor.shape.size() != 2) return tensor;
  const int64_t rows = tensor.shape[0], cols = tensor.shape[1];
  const DType target = storable_dtype(*matrix_dtype_, cols);
  if (!dtype_is_quantized(target) || target == *tensor.dtype) return tensor;
  const size_t target_row = dtype_row_bytes(target, cols);
  std::vector<uint8_t> bytes(static_cast<size_t>(rows) * target_row);
  quantize_rows(ComputeContext{omp_get_max_threads()}, tensor.data, *tensor.dtype, rows, cols, target,
                bytes.data());
  owned_bytes_.push_back(std::move(bytes));
  finished(tensor);
  StoredTensor copy = tensor;
  copy.dtype = target;
  copy.dtype_string = std::string(dtype_name(target));
  copy.data = owned_bytes_.back().data();
  copy.byte_size = owned_bytes_.back().size();
  owned_tensors_.push_back(std::move(copy));
  return owned_tensors_.back();
}

const float* WeightBinder::f32_if_present(const std::string& name, const std::vector<int64_t>& shape) {
  return has(name) ? f32(name, shape) : nullptr;
}

const float* WeightBinder::conv_taps(const std::string& name, int64_t channels, int64_t kernel_size) {
  const float* conv = f32(name, {channels, 1, kernel_size});
  std::vector<float> taps(kernel_size * channels);
  for (int64_t c = 0; c < channels; ++c)
    for (int64_t k = 0; k < kernel_size; ++k) taps[k * channels + c] = conv[c * kernel_size + k];
  return keep(std::move(taps));
}

const float* WeightBinder::keep(std::vector<float> values) {
  owned_floats_.push_back(std::move(values));
  return owned_floats_.back().data();
}

}  // namespace mb

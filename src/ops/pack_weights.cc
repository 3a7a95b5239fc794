#include <omp.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "core/error.h"
#include "ops/matmul.h"
#include "ops/quant.h"
#include "ops/quant_matmul.h"

namespace mb {
namespace {

// Position of output `lane` (0..63) inside a packed panel row. bf16 rows interleave each pair
// of 16-wide vectors element by element, so a kernel widens 32 of them with one load, a shift
// and a mask (see load_bf16_interleaved in src/ops/cpu); other dtypes keep plain order.
int64_t slot_in_row(int64_t lane, DType dtype) {
  if (dtype != DType::BF16) return lane;
  const int64_t pair = lane / 32, vector = (lane / 16) % 2, index = lane % 16;
  return pair * 32 + 2 * index + vector;
}

}  // namespace

size_t packed_bytes(const WeightMatrix& w) {
  if (w.rows <= 0 || w.cols <= 0) return 0;
  if (dtype_is_quantized(w.dtype)) {
    const int64_t panels = (w.rows + kQuantPanel - 1) / kQuantPanel;
    return static_cast<size_t>(panels * kQuantPanel) * dtype_row_bytes(w.dtype, w.cols);
  }
  return static_cast<size_t>(w.panels() * kPanelWidth * w.cols) * dtype_size(w.dtype);
}

WeightMatrix output_range(const WeightMatrix& w, int64_t first, int64_t count) {
  MB_CHECK(first >= 0 && first % kPanelWidth == 0 && first < w.rows && count > 0);
  const size_t panel_bytes = packed_bytes({nullptr, w.dtype, kPanelWidth, w.cols});
  const auto* data =
      static_cast<const uint8_t*>(w.data) + static_cast<size_t>(first / kPanelWidth) * panel_bytes;
  return {data, w.dtype, std::min(count, w.rows - first), w.cols};
}

std::vector<uint8_t> pack_weights(const void* source, DType source_dtype, int64_t rows, int64_t cols,
                                  DType target_dtype) {
  if (dtype_is_quantized(source_dtype) || dtype_is_quantized(target_dtype)) {
    const size_t source_row = dtype_row_bytes(source_dtype, cols);
    const auto* src = static_cast<const uint8_t*>(source);
    if (source_dtype == target_dtype) return pack_quantized(source, target_dtype, rows, cols);
    const size_t target_row = dtype_row_bytes(target_dtype, cols);
    std::vector<uint8_t> converted(static_cast<size_t>(rows) * target_row);
    if (dtype_is_quantized(target_dtype)) {
      quantize_rows(ComputeContext{omp_get_max_threads()}, source, source_dtype, rows, cols, target_dtype,
                    converted.data());
      return pack_quantized(converted.data(), target_dtype, rows, cols);
    }
    // A quantized source widened to a float dtype, through f32 one row at a time.
#pragma omp parallel
    {
      std::vector<float> row(static_cast<size_t>(cols));
#pragma omp for schedule(static)
      for (int64_t n = 0; n < rows; ++n) {
        dequantize_row(source_dtype, src + n * source_row, cols, row.data());
        quantize_row(target_dtype, row.data(), cols, converted.data() + n * target_row);
      }
    }
    return pack_weights(converted.data(), target_dtype, rows, cols, target_dtype);
  }
  const int64_t panels = (rows + kPanelWidth - 1) / kPanelWidth;
  const size_t element = dtype_size(target_dtype);
  std::vector<uint8_t> packed(static_cast<size_t>(panels * cols * kPanelWidth) * element, 0);
  const auto* src = static_cast<const uint8_t*>(source);
  const size_t source_element = dtype_size(source_dtype);
  for (int64_t n = 0; n < rows; ++n) {
    const int64_t panel = n / kPanelWidth, lane = n % kPanelWidth;
    for (int64_t k = 0; k < cols; ++k) {
      const uint8_t* from = src + (n * cols + k) * source_element;
      uint8_t* to =
          packed.data() + ((panel * cols + k) * kPanelWidth + slot_in_row(lane, target_dtype)) * element;
      if (source_dtype == target_dtype) {
        std::memcpy(to, from, element);
        continue;
      }
      float value;
      if (source_dtype == DType::F32) {
        std::memcpy(&value, from, 4);
      } else {
        uint16_t half;
        std::memcpy(&half, from, 2);
        value = source_dtype == DType::BF16 ? bf16_to_f32(half) : f16_to_f32(half);
      }
      if (target_dtype == DType::F32) {
        std::memcpy(to, &value, 4);
      } else {
        const uint16_t half = target_dtype == DType::BF16 ? f32_to_bf16(value) : f32_to_f16(value);
        std::memcpy(to, &half, 2);
      }
    }
  }
  return packed;
}

float packed_weight(const WeightMatrix& w, int64_t n, int64_t k) {
  if (dtype_is_quantized(w.dtype)) {
    std::vector<float> row(static_cast<size_t>(w.cols));
    dequantize_packed_row(w, n, row.data());
    return row[k];
  }
  const int64_t index =
      ((n / kPanelWidth) * w.cols + k) * kPanelWidth + slot_in_row(n % kPanelWidth, w.dtype);
  return load_as_f32(w.data, w.dtype, static_cast<size_t>(index));
}

}  // namespace mb

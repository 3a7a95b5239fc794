// SPDX-License-Identifier: MIT
#include <omp.h>

#include <algorithm>
#include <cstring>
#include <type_traits>
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

// One float element of dtype kType at p, as f32 (exact: bf16 and f16 widen without rounding).
template <DType kType>
float read_f32(const uint8_t* p) {
  if constexpr (kType == DType::F32) {
    float value;
    std::memcpy(&value, p, 4);
    return value;
  } else {
    uint16_t half;
    std::memcpy(&half, p, 2);
    return kType == DType::BF16 ? bf16_to_f32(half) : f16_to_f32(half);
  }
}

// Rows of a row-major [rows, cols] float matrix of dtype kFrom into panels of kTo: panel by panel
// in parallel (each writes only its own bytes), a row's elements converted to kTo (rounding to
// nearest even when it narrows) or copied as they are when the dtypes agree.
template <DType kTo, DType kFrom>
void pack_float_panels(const uint8_t* src, int64_t rows, int64_t cols, uint8_t* packed) {
  using Stored = std::conditional_t<kTo == DType::F32, uint32_t, uint16_t>;
  constexpr size_t kFromBytes = kFrom == DType::F32 ? 4 : 2;
  const int64_t panels = (rows + kPanelWidth - 1) / kPanelWidth;
#pragma omp parallel for schedule(static)
  for (int64_t panel = 0; panel < panels; ++panel) {
    auto* panel_start = reinterpret_cast<Stored*>(packed) + panel * cols * kPanelWidth;
    for (int64_t n = panel * kPanelWidth; n < std::min(rows, (panel + 1) * kPanelWidth); ++n) {
      Stored* to = panel_start + slot_in_row(n % kPanelWidth, kTo);
      const uint8_t* from = src + static_cast<size_t>(n * cols) * kFromBytes;
      for (int64_t k = 0; k < cols; ++k) {
        Stored value;
        if constexpr (kFrom == kTo) {
          std::memcpy(&value, from + k * kFromBytes, sizeof value);
        } else {
          const float f = read_f32<kFrom>(from + k * kFromBytes);
          if constexpr (kTo == DType::F32)
            std::memcpy(&value, &f, 4);
          else
            value = kTo == DType::BF16 ? f32_to_bf16(f) : f32_to_f16(f);
        }
        to[k * kPanelWidth] = value;
      }
    }
  }
}

template <DType kTo>
void pack_float_rows(const uint8_t* src, DType from, int64_t rows, int64_t cols, uint8_t* packed) {
  switch (from) {
    case DType::F32:
      return pack_float_panels<kTo, DType::F32>(src, rows, cols, packed);
    case DType::BF16:
      return pack_float_panels<kTo, DType::BF16>(src, rows, cols, packed);
    default:
      return pack_float_panels<kTo, DType::F16>(src, rows, cols, packed);
  }
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
  std::vector<uint8_t> packed(static_cast<size_t>(panels * cols * kPanelWidth) * dtype_size(target_dtype), 0);
  const auto* src = static_cast<const uint8_t*>(source);
  switch (target_dtype) {
    case DType::F32:
      pack_float_rows<DType::F32>(src, source_dtype, rows, cols, packed.data());
      break;
    case DType::BF16:
      pack_float_rows<DType::BF16>(src, source_dtype, rows, cols, packed.data());
      break;
    default:
      pack_float_rows<DType::F16>(src, source_dtype, rows, cols, packed.data());
      break;
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

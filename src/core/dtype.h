// SPDX-License-Identifier: MIT
// Storage dtypes for weights and the scalar conversions between them.
//
// Compute is always f32. bf16 and f16 weights stay in their storage dtype in memory and are
// widened to f32 inside the kernels, so a bf16 model streams half the bytes per token.
//
// The quantized dtypes are GGML's block formats (layouts and (de)quantizers in ops/quant.h): a
// row of K weights is K / dtype_block_weights blocks of dtype_block_bytes each. They have no
// per-element size and no single-element access; code that handles any dtype asks
// dtype_is_quantized first and goes through ops/quant.h for those.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

#include "core/error.h"

namespace mb {

// Appended only: the numeric values of existing dtypes never change.
enum class DType : uint8_t { F32, BF16, F16, Q8_0, Q4_0, Q4_K, Q6_K };

bool dtype_is_quantized(DType dtype);
// Weights per block: 1 for the float dtypes, 32 for Q8_0/Q4_0, 256 for Q4_K/Q6_K.
int64_t dtype_block_weights(DType dtype);
// Bytes per block: 4, 2, 2 for f32, bf16, f16; 34, 18, 144, 210 for Q8_0, Q4_0, Q4_K, Q6_K.
size_t dtype_block_bytes(DType dtype);
// Bytes of a row of `cols` weights; throws mb::Error when cols is negative or not a multiple of
// the block.
size_t dtype_row_bytes(DType dtype, int64_t cols);
// Bytes per element of a float dtype; throws mb::Error for a quantized one (see above).
size_t dtype_size(DType dtype);
std::string_view dtype_name(DType dtype);  // "f32", "bf16", "f16", "q8_0", "q4_0", "q4_k", "q6_k"
// Accepts every name dtype_name gives (any case) plus "float32", "bfloat16", "float16"; throws
// mb::Error otherwise.
DType parse_dtype(std::string_view name);
[[noreturn]] void throw_quantized_element_access(DType dtype);

inline float bf16_to_f32(uint16_t bits) {
  uint32_t widened = static_cast<uint32_t>(bits) << 16;
  float value;
  std::memcpy(&value, &widened, sizeof value);
  return value;
}

// Round to nearest even, the rounding PyTorch and the hardware conversions use. NaN stays NaN.
inline uint16_t f32_to_bf16(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof bits);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((bits >> 16) | 0x40u);
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>(bits >> 16);
}

float f16_to_f32(uint16_t bits);
uint16_t f32_to_f16(float value);  // round to nearest even, overflow to infinity

// Widens element `index` of a buffer stored in `dtype`.
inline float load_as_f32(const void* data, DType dtype, size_t index) {
  switch (dtype) {
    case DType::F32: return static_cast<const float*>(data)[index];
    case DType::BF16: return bf16_to_f32(static_cast<const uint16_t*>(data)[index]);
    case DType::F16: return f16_to_f32(static_cast<const uint16_t*>(data)[index]);
    case DType::Q8_0:
    case DType::Q4_0:
    case DType::Q4_K:
    case DType::Q6_K: throw_quantized_element_access(dtype);
  }
  return 0.0f;
}

// Widens `count` elements stored in a float `dtype` at a possibly unaligned address (quantized
// rows: dequantize_row of ops/quant.h).
inline void widen_row(const void* source, DType dtype, int64_t count, float* out) {
  if (dtype_is_quantized(dtype)) throw_quantized_element_access(dtype);
  const auto* bytes = static_cast<const uint8_t*>(source);
  if (dtype == DType::F32) {
    std::memcpy(out, bytes, static_cast<size_t>(count) * 4);
    return;
  }
  for (int64_t i = 0; i < count; ++i) {
    uint16_t half;
    std::memcpy(&half, bytes + 2 * i, 2);
    out[i] = dtype == DType::BF16 ? bf16_to_f32(half) : f16_to_f32(half);
  }
}

}  // namespace mb

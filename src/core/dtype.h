// Storage dtypes for weights and the scalar conversions between them.
//
// Compute is always f32. bf16 and f16 weights stay in their storage dtype in memory and are
// widened to f32 inside the kernels, so a bf16 model streams half the bytes per token.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

namespace mb {

enum class DType : uint8_t { F32, BF16, F16 };

size_t dtype_size(DType dtype);
std::string_view dtype_name(DType dtype);         // "f32", "bf16", "f16"
DType parse_dtype(std::string_view name);         // accepts f32/bf16/f16 (any case); throws mb::Error

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
  }
  return 0.0f;
}

// Widens `count` elements stored in `dtype` at a possibly unaligned address.
inline void widen_row(const void* source, DType dtype, int64_t count, float* out) {
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

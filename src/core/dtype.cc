// SPDX-License-Identifier: MIT
#include "core/dtype.h"

#include <algorithm>
#include <cctype>
#include <cmath>

#include "core/error.h"

namespace mb {

bool dtype_is_quantized(DType dtype) {
  switch (dtype) {
    case DType::F32:
    case DType::BF16:
    case DType::F16:
      return false;
    case DType::Q8_0:
    case DType::Q4_0:
    case DType::Q4_K:
    case DType::Q6_K:
      return true;
  }
  return false;
}

int64_t dtype_block_weights(DType dtype) {
  switch (dtype) {
    case DType::F32:
    case DType::BF16:
    case DType::F16:
      return 1;
    case DType::Q8_0:
    case DType::Q4_0:
      return 32;
    case DType::Q4_K:
    case DType::Q6_K:
      return 256;
  }
  return 1;
}

size_t dtype_block_bytes(DType dtype) {
  switch (dtype) {
    case DType::F32:
      return 4;
    case DType::BF16:
    case DType::F16:
      return 2;
    case DType::Q8_0:
      return 34;  // f16 scale + 32 int8
    case DType::Q4_0:
      return 18;  // f16 scale + 16 bytes of nibbles
    case DType::Q4_K:
      return 144;  // f16 d, f16 dmin, 12 bytes of 6-bit scales/mins, 128 of nibbles
    case DType::Q6_K:
      return 210;  // 128 low nibbles, 64 high 2-bit pairs, 16 int8 scales, f16 d
  }
  return 0;
}

size_t dtype_row_bytes(DType dtype, int64_t cols) {
  const int64_t block = dtype_block_weights(dtype);
  if (cols < 0 || cols % block != 0)
    throw Error("a row of " + std::to_string(cols) + " weights cannot be stored as " +
                std::string(dtype_name(dtype)) + " (its blocks hold " + std::to_string(block) + " weights)");
  return static_cast<size_t>(cols / block) * dtype_block_bytes(dtype);
}

size_t dtype_size(DType dtype) {
  if (dtype_is_quantized(dtype)) throw_quantized_element_access(dtype);
  return dtype == DType::F32 ? 4 : 2;
}

void throw_quantized_element_access(DType dtype) {
  throw Error("dtype " + std::string(dtype_name(dtype)) +
              " is block-quantized: it has no per-element size or access (use dequantize_row)");
}

std::string_view dtype_name(DType dtype) {
  switch (dtype) {
    case DType::F32:
      return "f32";
    case DType::BF16:
      return "bf16";
    case DType::F16:
      return "f16";
    case DType::Q8_0:
      return "q8_0";
    case DType::Q4_0:
      return "q4_0";
    case DType::Q4_K:
      return "q4_k";
    case DType::Q6_K:
      return "q6_k";
  }
  return "?";
}

DType parse_dtype(std::string_view name) {
  std::string lower(name);
  std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return std::tolower(c); });
  if (lower == "f32" || lower == "float32") return DType::F32;
  if (lower == "bf16" || lower == "bfloat16") return DType::BF16;
  if (lower == "f16" || lower == "float16") return DType::F16;
  if (lower == "q8_0") return DType::Q8_0;
  if (lower == "q4_0") return DType::Q4_0;
  if (lower == "q4_k") return DType::Q4_K;
  if (lower == "q6_k") return DType::Q6_K;
  throw Error("unknown dtype '" + std::string(name) +
              "' (expected f32, bf16, f16, q8_0, q4_0, q4_k or q6_k)");
}

float f16_to_f32(uint16_t bits) {
  const uint32_t sign = static_cast<uint32_t>(bits & 0x8000u) << 16;
  const uint32_t exponent = (bits >> 10) & 0x1fu;
  const uint32_t mantissa = bits & 0x3ffu;
  uint32_t out;
  if (exponent == 0) {
    // Zero or subnormal: the value is mantissa * 2^-24, exact in f32.
    float magnitude = std::ldexp(static_cast<float>(mantissa), -24);
    std::memcpy(&out, &magnitude, sizeof out);
    out |= sign;
  } else if (exponent == 31) {
    out = sign | 0x7f800000u | (mantissa << 13);
  } else {
    out = sign | ((exponent + 112) << 23) | (mantissa << 13);
  }
  float value;
  std::memcpy(&value, &out, sizeof value);
  return value;
}

uint16_t f32_to_f16(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof bits);
  const uint16_t sign = static_cast<uint16_t>((bits >> 16) & 0x8000u);
  const uint32_t abs_bits = bits & 0x7fffffffu;
  if (abs_bits > 0x7f800000u) return sign | 0x7e00u;   // NaN
  if (abs_bits >= 0x477ff000u) return sign | 0x7c00u;  // rounds to or beyond infinity
  if (abs_bits < 0x38800000u) {
    // Result is subnormal (or zero) in f16: scale so the integer part is the f16 mantissa,
    // then let the FPU's round-to-nearest-even do the rounding.
    float magnitude;
    std::memcpy(&magnitude, &abs_bits, sizeof magnitude);
    const float scaled = std::nearbyint(magnitude * 16777216.0f);  // 2^24, exact
    return sign | static_cast<uint16_t>(scaled);
  }
  uint32_t rounded = abs_bits + 0xfffu + ((abs_bits >> 13) & 1u);
  return sign | static_cast<uint16_t>((rounded - (112u << 23)) >> 13);
}

}  // namespace mb

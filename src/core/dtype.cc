#include "core/dtype.h"

#include <algorithm>
#include <cctype>
#include <cmath>

#include "core/error.h"

namespace mb {

size_t dtype_size(DType dtype) { return dtype == DType::F32 ? 4 : 2; }

std::string_view dtype_name(DType dtype) {
  switch (dtype) {
    case DType::F32: return "f32";
    case DType::BF16: return "bf16";
    case DType::F16: return "f16";
  }
  return "?";
}

DType parse_dtype(std::string_view name) {
  std::string lower(name);
  std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return std::tolower(c); });
  if (lower == "f32" || lower == "float32") return DType::F32;
  if (lower == "bf16" || lower == "bfloat16") return DType::BF16;
  if (lower == "f16" || lower == "float16") return DType::F16;
  throw Error("unknown dtype '" + std::string(name) + "' (expected f32, bf16 or f16)");
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
  if (abs_bits > 0x7f800000u) return sign | 0x7e00u;  // NaN
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

// SPDX-License-Identifier: MIT
// The decode of the packed weight panels of src/ops/matmul.h (pack_weights), free of bindings so
// that every shader reading packed weights decodes them the same way: the GEMM shaders through
// matmul_common.glsl and the selective scan's fused dt_proj (selective_scan.glsl). A panel holds
// 64 outputs (rows of W) by all K inputs, [panels][K][64] in the dtype; 16-bit dtypes pack two
// elements per 32-bit word, the lower half first.
#ifndef MB_PACKED_WEIGHTS_GLSL
#define MB_PACKED_WEIGHTS_GLSL

#include "mb_math.glsl"

const uint kPanelWidth = 64;

// The dtype codes of the push constants: 0 f32, 1 bf16, 2 f16.
const uint kWeightF32 = 0u;
const uint kWeightBf16 = 1u;

// f16 bits to f32, exactly (as f16_to_f32 in src/core/dtype.cc; no dependence on the device's
// half-float conversion or its handling of f16 subnormals).
float f16_to_f32(uint h) {
  const uint sign = (h & 0x8000u) << 16;
  const uint exponent = (h >> 10) & 0x1fu;
  const uint mantissa = h & 0x3ffu;
  if (exponent == 0u) return uintBitsToFloat(floatBitsToUint(float(mantissa) * mb_pow2(-24)) | sign);
  if (exponent == 31u) return uintBitsToFloat(sign | 0x7f800000u | (mantissa << 13));
  return uintBitsToFloat(sign | ((exponent + 112u) << 23) | (mantissa << 13));
}

// The position of output `lane` (0..63) in its packed panel row: bf16 panels interleave each pair
// of 16-output vectors element by element (pack_weights); f32 and f16 panels are in order.
uint panel_slot(uint lane, uint dtype) {
  return dtype == kWeightBf16 ? (lane / 32u) * 32u + 2u * (lane % 16u) + (lane / 16u) % 2u : lane;
}

// The element index of W[n, kk] for n at `slot` of panel `panel` of a K-column matrix whose
// panels start at element w_offset.
uint packed_index(uint w_offset, uint panel, uint k, uint kk, uint slot) {
  return w_offset + (panel * k + kk) * kPanelWidth + slot;
}

// The 32-bit word that holds element `index`.
uint packed_word_index(uint index, uint dtype) {
  return dtype == kWeightF32 ? index : index >> 1;
}

// Element `index` widened to f32, given the word packed_word_index named.
float decode_packed(uint word, uint index, uint dtype) {
  if (dtype == kWeightF32) return uintBitsToFloat(word);
  const uint bits = (index & 1u) != 0u ? word >> 16 : word & 0xffffu;
  return dtype == kWeightBf16 ? uintBitsToFloat(bits << 16) : f16_to_f32(bits);
}

#endif

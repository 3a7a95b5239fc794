// SPDX-License-Identifier: MIT
// The per-row activation quantizer of src/ops/quant_matmul.h (quantize_activations; the CPU
// kernels' quantize_row gives the same bits) for a workgroup of 64 invocations, one step of 256
// values of up to kQRows rows at a time. quant_matmul.glsl runs it in front of its dot products
// (a decode step's rows are quantized inside the GEMV, no dispatch of their own) and
// quant_rows.comp for the rows of a prefill GEMM; both therefore give the same levels.
//
// Per block of kActBlock values (32 or 256): amax = the largest |x| (NaNs skipped, floored at +0),
// dx = amax / 127, inverse = 1 / dx (0 when dx is 0), and each level is
// round_to_even(clamp(x * inverse, -127, 127)), 0 where x * inverse is NaN; X, the sum of each
// 16 consecutive levels. The maximum and the sums are exact in any order, so the invocations
// combine them with shared-memory atomics; every other value is one IEEE operation (the
// divisions corrected to correct rounding by mb_div).
//
// The includer defines kQRows, kActBlock (a divisor of 256, a multiple of 16) and
// `float qa_input(uint r, uint kk)`, the input value of column kk of the workgroup's row r.
// Every function here holds barriers: call it from uniform control flow.
#ifndef MB_QUANT_ACTIVATIONS_GLSL
#define MB_QUANT_ACTIVATIONS_GLSL

#include "mb_math.glsl"

const uint kQaBlocks = 256u / kActBlock;  // activation blocks per step

shared uint qa_q[kQRows * 64u];            // the step's levels: word j of row r (values 4j..4j+3) at r * 64 + j
shared float qa_dx[kQRows * kQaBlocks];    // dx of block j of the step of row r at r * kQaBlocks + j
shared int qa_sums[2u * kQRows * 16u];     // by step parity: X of the 16 values 16g.. of row r at r * 16 + g
shared uint qa_amax[2u * kQRows * kQaBlocks];  // by step parity: the bits of each block's amax

// Zeroes the first step's sums and maxima; a barrier must follow before qa_step.
void qa_begin(uint id) {
  for (uint e = id; e < kQRows * 16u; e += 64u) qa_sums[e] = 0;
  for (uint e = id; e < kQRows * kQaBlocks; e += 64u) qa_amax[e] = 0u;
}

// |x| as the maximum sees it: NaN and -0 count as +0, so the largest of these over a block is the
// CPU's (which skips NaNs and starts from +0). Non-negative floats order as their bits.
uint qa_magnitude(float x) {
  const float magnitude = x > 0.0 ? x : (x < 0.0 ? -x : 0.0);
  return floatBitsToUint(magnitude);
}

// The level of x given the block's inverse scale.
int qa_level(float x, float inverse) {
  precise float v = x * inverse;
  precise float c = v < -127.0 ? -127.0 : v;
  c = 127.0 < c ? 127.0 : c;
  return isnan(v) ? 0 : int(roundEven(c));
}

// Quantizes values step * 256 .. step * 256 + 255 of the first `rows` rows (columns below k) into
// qa_q, qa_dx and this step's half of qa_sums. Invocation id takes values 4 id .. 4 id + 3.
void qa_step(uint id, uint step, uint k, uint rows) {
  const uint parity = step % 2u;
  const uint kk = step * 256u + 4u * id;
  const bool inside = kk < k;  // k is a multiple of 32, so the four values are all inside or none are
  const uint block = 4u * id / kActBlock;
  float v[kQRows][4];
  for (uint r = 0u; r < kQRows; ++r) {
    if (r >= rows || !inside) continue;
    uint largest = 0u;
    for (uint i = 0u; i < 4u; ++i) {
      v[r][i] = qa_input(r, kk + i);
      largest = max(largest, qa_magnitude(v[r][i]));
    }
    atomicMax(qa_amax[(parity * kQRows + r) * kQaBlocks + block], largest);
  }
  barrier();
  // The other parity's sums and maxima were last read before this step's barrier above; the next
  // step adds to them after the barrier below.
  const uint other = parity ^ 1u;
  for (uint e = id; e < kQRows * 16u; e += 64u) qa_sums[other * kQRows * 16u + e] = 0;
  for (uint e = id; e < kQRows * kQaBlocks; e += 64u) qa_amax[other * kQRows * kQaBlocks + e] = 0u;
  for (uint r = 0u; r < kQRows; ++r) {
    if (r >= rows || !inside) continue;
    const float amax = uintBitsToFloat(qa_amax[(parity * kQRows + r) * kQaBlocks + block]);
    const float d = amax == 0.0 || isinf(amax) ? amax : mb_div(amax, 127.0);
    const float inverse = d == 0.0 || isinf(d) ? 0.0 : mb_div(1.0, d);
    uint word = 0u;
    int sum = 0;
    for (uint i = 0u; i < 4u; ++i) {
      const int level = qa_level(v[r][i], inverse);
      word |= (uint(level) & 0xffu) << (8u * i);
      sum += level;
    }
    qa_q[r * 64u + id] = word;
    atomicAdd(qa_sums[(parity * kQRows + r) * 16u + id / 4u], sum);
    if (4u * id % kActBlock == 0u) qa_dx[r * kQaBlocks + block] = d;
  }
  barrier();
}

// The step's X of values 16g .. 16g + 15 of row r.
int qa_sum16(uint step, uint r, uint g) {
  return qa_sums[((step % 2u) * kQRows + r) * 16u + g];
}

#endif

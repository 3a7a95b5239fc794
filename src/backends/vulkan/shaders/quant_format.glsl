// SPDX-License-Identifier: MIT
// The packed quantized weights of src/ops/quant_matmul.h as the quantized GEMM shaders read them,
// and the integer and float arithmetic that turns a weight block into one term of an output's sum.
//
// The device holds the CPU's tiles unchanged (VulkanBackend::upload_matrix copies them): outputs
// in panels of 16, per panel one tile per weight block along K, tile (p, b) at
// (p * blocks + b) * tile bytes. Every tile size is a multiple of 32 bytes, so a tile starts on a
// word. Inside a tile, lane l (the output within its panel) keeps its f16 scales at byte 2l (d)
// and 32 + 2l (Q4_K's dmin), its sub-block scales at byte 16j + l of their area, and its levels
// (the unsigned integers the dot products multiply) as the word 16c + l of each 64-byte chunk c.
//
// "Level word j" of a lane is the four levels of weights 4j .. 4j + 3 of the block, one byte each
// (low byte first), the operand of dot4. level_word decodes it from the tile; the GEMV decodes
// the same words in its own order (quant_matmul.glsl) so that each tile word is read once.
//
// Per weight block, with q the activations' int8 levels and X_s their sum over sub-block s
// (quant_matmul.h):
//   Q8_0: I = S - 128 X                        term = float(I) * (d * dx)
//   Q4_0: I = S - 8 X                          term = float(I) * (d * dx)
//   Q4_K: I = sum_s sc_s S_s, J = sum_s m_s X_s   term = float(I) * (d * dx) - float(J) * (dmin * dx)
//   Q6_K: I = sum_s sc_s (S_s - 32 X_s)        term = float(I) * (d * dx)
// The integer sums are int32 arithmetic, which wraps: a ring, so they have the same bits in any
// order (the CPU's and every split of them across invocations). Each term is the CPU's fixed
// sequence of IEEE operations, and an output adds its terms in block order.
//
// The includer declares kType (a specialization constant) before including this file and binds
// the packed weights as `w_words` (uint words).
#ifndef MB_QUANT_FORMAT_GLSL
#define MB_QUANT_FORMAT_GLSL

#include "mb_math.glsl"
#include "packed_weights.glsl"

// The weight formats, as record_quant_matmul names them in kType.
const uint kQ8_0 = 0u;
const uint kQ4_0 = 1u;
const uint kQ4_K = 2u;
const uint kQ6_K = 3u;

const uint kQuantPanel = 16u;  // outputs per panel (ops/quant_matmul.h)
const uint kStepWeights = 256u;  // weights of K one step of the shaders covers
const uint kStepWords = kStepWeights / 4u;  // level words (and activation words) of a step

const bool kSmallBlocks = kType == kQ8_0 || kType == kQ4_0;
const uint kBlock = kSmallBlocks ? 32u : 256u;  // weights per block, and per activation scale
const uint kBlocksPerStep = kStepWeights / kBlock;  // 8 or 1
const uint kBlockWords = kBlock / 4u;  // level words per block
// Words of one tile: 16 GGML blocks of 34, 18, 144 or 210 bytes.
const uint kTileWords = kType == kQ8_0 ? 136u : kType == kQ4_0 ? 72u : kType == kQ4_K ? 576u : 840u;
// The first word of the levels (after the scale fields); Q6_K's high bits start at kHighWords.
const uint kLevelWords = kType == kQ4_K ? 64u : kType == kQ6_K ? 72u : 8u;
const uint kHighWords = 584u;
// Sub-blocks per block (each with its own integer scale in the K-quants), their width in words,
// and the level offset subtracted per sub-block (times X).
const uint kSubBlocks = kType == kQ4_K ? 8u : kType == kQ6_K ? 16u : 1u;
const uint kSubWords = kBlockWords / kSubBlocks;
const int kOffset = kType == kQ8_0 ? 128 : kType == kQ4_0 ? 8 : kType == kQ6_K ? 32 : 0;

// Byte `byte_index` of the tile starting at word `tile`.
uint tile_byte(uint tile, uint byte_index) {
  return (w_words[tile + byte_index / 4u] >> (8u * (byte_index % 4u))) & 0xffu;
}

// The f16 at byte `byte_index` (even) of the tile, widened exactly.
float tile_half(uint tile, uint byte_index) {
  const uint word = w_words[tile + byte_index / 4u];
  return f16_to_f32((byte_index % 4u) != 0u ? word >> 16 : word & 0xffffu);
}

// Lane l's d and (Q4_K) dmin.
float lane_d(uint tile, uint lane) {
  return tile_half(tile, 2u * lane);
}
float lane_dmin(uint tile, uint lane) {
  return tile_half(tile, 32u + 2u * lane);
}

// The integer scale of sub-block s of lane l (Q4_K: six bits from its twelve scale bytes; Q6_K:
// an int8), as BlockView::scale in quant_kernels.inc.
int lane_scale(uint tile, uint lane, uint s) {
  if (kType == kQ6_K) {
    const uint u = tile_byte(tile, 32u + 16u * s + lane);
    return int(u) - int((u >> 7) << 8);
  }
  if (s < 4u) return int(tile_byte(tile, 64u + 16u * s + lane) & 63u);
  return int((tile_byte(tile, 64u + 16u * (s + 4u) + lane) & 15u) |
             ((tile_byte(tile, 64u + 16u * (s - 4u) + lane) >> 6) << 4));
}

// The six-bit min of Q4_K sub-block s of lane l.
int lane_min(uint tile, uint lane, uint s) {
  if (s < 4u) return int(tile_byte(tile, 64u + 16u * (s + 4u) + lane) & 63u);
  return int((tile_byte(tile, 64u + 16u * (s + 4u) + lane) >> 4) | ((tile_byte(tile, 64u + 16u * s + lane) >> 6) << 4));
}

// Level word j (j < kBlockWords) of lane l of the tile at word `tile`.
uint level_word(uint tile, uint lane, uint j) {
  if (kType == kQ8_0) return w_words[tile + kLevelWords + 16u * j + lane];
  if (kType == kQ6_K) {
    const uint low = w_words[tile + kLevelWords + 16u * (j % 32u) + lane] >> (4u * (j / 32u));
    const uint high = w_words[tile + kHighWords + 16u * (j % 16u) + lane] >> (2u * (j / 16u));
    return (low & 0x0f0f0f0fu) | ((high & 0x03030303u) << 4);
  }
  const uint half_words = kBlockWords / 2u;  // the low nibbles hold the first half of the block
  return (w_words[tile + kLevelWords + 16u * (j % half_words) + lane] >> (4u * (j / half_words))) & 0x0f0f0f0fu;
}

// The four byte products of a level word (unsigned bytes) and an activation word (int8 bytes),
// summed: exact in int32.
int dot4(uint levels, uint x) {
  const int xi = int(x);
  return int(levels & 0xffu) * bitfieldExtract(xi, 0, 8) + int((levels >> 8) & 0xffu) * bitfieldExtract(xi, 8, 8) +
         int((levels >> 16) & 0xffu) * bitfieldExtract(xi, 16, 8) + int(levels >> 24) * bitfieldExtract(xi, 24, 8);
}

// float(i) rounded to nearest even, whatever the device's integer conversion does: both halves
// convert exactly and the one addition rounds (Vulkan's OpFAdd is correctly rounded).
float mb_int_to_float(int i) {
  precise float high = float(i >> 16) * 65536.0;
  precise float result = high + float(i & 0xffff);
  return result;
}

// One block's term of an output: float(I) * (d * dx), minus float(J) * (dmin * dx) for Q4_K.
float block_term(int i_sum, int j_sum, float d, float dmin, float dx) {
  precise float scale = d * dx;
  precise float term = mb_int_to_float(i_sum) * scale;
  if (kType == kQ4_K) {
    precise float min_scale = dmin * dx;
    precise float min_part = mb_int_to_float(j_sum) * min_scale;
    term = term - min_part;
  }
  return term;
}

#endif

// SPDX-License-Identifier: MIT
// Packing of quantized weights into the tile layout of quant_matmul.h, and the per-row
// activation quantizer shared by every instruction set.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/error.h"
#include "ops/quant.h"
#include "ops/quant_matmul.h"

namespace mb {
namespace {

// Byte offset, inside a tile, of the stored weight levels (after the scale fields).
int64_t tile_levels_offset(DType type) {
  switch (type) {
    case DType::Q8_0:
    case DType::Q4_0:
      return 32;
    case DType::Q4_K:
      return 64 + 192;
    case DType::Q6_K:
      return 32 + 256;
    default:
      throw Error("not a quantized dtype: " + std::string(dtype_name(type)));
  }
}

void set_block_level(DType type, uint8_t* block, int k, int level) {
  auto set_nibble = [](uint8_t& byte, bool high, int value) {
    byte = static_cast<uint8_t>(high ? (byte & 0x0f) | (value << 4) : (byte & 0xf0) | value);
  };
  switch (type) {
    case DType::Q8_0:
      block[2 + k] = static_cast<uint8_t>(level ^ 0x80);
      return;
    case DType::Q4_0:
      return set_nibble(block[2 + k % 16], k >= 16, level);
    case DType::Q4_K: {
      const int group = k / 64, r = k % 64;
      return set_nibble(block[16 + 32 * group + r % 32], r >= 32, level);
    }
    case DType::Q6_K: {
      uint8_t* ql = block + 64 * (k / 128);
      uint8_t* qh = block + 128 + 32 * (k / 128);
      const int r = k % 128, l = r % 32, quarter = r / 32;
      set_nibble(quarter % 2 == 0 ? ql[l] : ql[l + 32], quarter >= 2, level & 15);
      qh[l] = static_cast<uint8_t>((qh[l] & ~(3 << (2 * quarter))) | ((level >> 4) << (2 * quarter)));
      return;
    }
    default:
      return;
  }
}

// Where the level of weight k of lane `lane` lives in a tile: a byte and, for 4-bit levels, a
// nibble (see quant_matmul.h). Q6_K's high two bits are placed by tile_high_bits below.
struct LevelSlot {
  int64_t byte;
  int shift;  // 0 or 4
};
LevelSlot tile_level_slot(DType type, int lane, int k) {
  const int64_t base = tile_levels_offset(type);
  if (type == DType::Q8_0) return {base + 64 * (k / 4) + 4 * lane + k % 4, 0};
  const int half = type == DType::Q4_K || type == DType::Q6_K ? 128 : 16;  // half the block's weights
  const int kk = k % half;
  return {base + 64 * (kk / 4) + 4 * lane + kk % 4, k >= half ? 4 : 0};
}
LevelSlot tile_high_bits(int lane, int k) {
  const int group = k / 4;
  return {32 + 256 + 2048 + 64 * (group % 16) + 4 * lane + k % 4, 2 * (group / 16)};
}

// Copies the scale fields of one lane between a GGML block and a tile.
void copy_scales(DType type, uint8_t* tile, int lane, uint8_t* block, bool into_tile) {
  auto move = [into_tile](uint8_t* tile_bytes, uint8_t* block_bytes, size_t n) {
    if (into_tile)
      std::memcpy(tile_bytes, block_bytes, n);
    else
      std::memcpy(block_bytes, tile_bytes, n);
  };
  switch (type) {
    case DType::Q8_0:
    case DType::Q4_0:
      return move(tile + 2 * lane, block, 2);
    case DType::Q4_K:
      move(tile + 2 * lane, block, 2);
      move(tile + 32 + 2 * lane, block + 2, 2);
      for (int j = 0; j < 12; ++j) move(tile + 64 + 16 * j + lane, block + 4 + j, 1);
      return;
    case DType::Q6_K:
      move(tile + 2 * lane, block + 208, 2);
      for (int s = 0; s < 16; ++s) move(tile + 32 + 16 * s + lane, block + 192 + s, 1);
      return;
    default:
      return;
  }
}

inline uint32_t load_u32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}
inline void store_u32(uint8_t* p, uint32_t v) {
  std::memcpy(p, &v, 4);
}

// The low (high = false) or high nibbles of four bytes, each in the low half of its byte.
inline uint32_t nibbles(uint32_t w, bool high) {
  return (high ? w >> 4 : w) & 0x0F0F0F0Fu;
}

// One GGML block into lane `lane` of its tile, four levels (one 32-bit word of the tile) at a
// time: loading a model visits every weight, and a level at a time ran at about 400 MB/s per
// core. The layout is quant_matmul.h's; block_from_tile reads it back a level at a time
// (tile_level_slot), which is what the packing tests compare with.
template <DType kType>
void block_into_tile(const uint8_t* block, uint8_t* tile, int lane) {
  copy_scales(kType, tile, lane, const_cast<uint8_t*>(block), true);
  uint8_t* levels = tile + tile_levels_offset(kType) + 4 * lane;
  if constexpr (kType == DType::Q8_0) {
    // Levels are qs + 128: the sign bit of each byte flipped.
    for (int c = 0; c < 8; ++c) store_u32(levels + 64 * c, load_u32(block + 2 + 4 * c) ^ 0x80808080u);
  } else if constexpr (kType == DType::Q4_0) {
    // Weights 4c + i (low nibbles of qs[4c + i]) and 16 + 4c + i (its high nibbles): qs as stored.
    for (int c = 0; c < 4; ++c) store_u32(levels + 64 * c, load_u32(block + 2 + 4 * c));
  } else if constexpr (kType == DType::Q4_K) {
    // Weight k lies in qs[32 (k / 64) + k % 32], in its high nibble when k % 64 >= 32; chunk c holds
    // weights 4c + i (low nibbles) and 128 + 4c + i (high nibbles), 64 qs bytes further on.
    const uint8_t* qs = block + 16;
    for (int c = 0; c < 32; ++c) {
      const int at = 32 * (c / 16) + 4 * (c % 8);
      const bool high = c % 16 >= 8;
      store_u32(levels + 64 * c, nibbles(load_u32(qs + at), high) | nibbles(load_u32(qs + at + 64), high)
                                                                        << 4);
    }
  } else {
    static_assert(kType == DType::Q6_K);
    // The low four bits of weight k (quarter q = k % 128 / 32 of its half) lie in
    // ql[64 (k / 128) + 32 (q % 2) + k % 32], in the high nibble when q >= 2; chunk c holds
    // weights 4c + i and 128 + 4c + i.
    for (int c = 0; c < 32; ++c) {
      const int quarter = c / 8, at = 32 * (quarter % 2) + 4 * (c % 8);
      const bool high = quarter >= 2;
      store_u32(levels + 64 * c,
                nibbles(load_u32(block + at), high) | nibbles(load_u32(block + 64 + at), high) << 4);
    }
    // The high two bits of weight k lie in qh[32 (k / 128) + k % 32], at bit 2q. Chunk h holds
    // those of weights 4(h + 16j) + i in bits 2j, 2j + 1: half j / 2, quarter h / 8 + 2 (j % 2).
    uint8_t* high_bits = levels + 2048;
    for (int h = 0; h < 16; ++h) {
      uint32_t word = 0;
      for (int j = 0; j < 4; ++j) {
        const int quarter = h / 8 + 2 * (j % 2);
        const uint32_t qh = load_u32(block + 128 + 32 * (j / 2) + 4 * (h % 8));
        word |= ((qh >> (2 * quarter)) & 0x03030303u) << (2 * j);
      }
      store_u32(high_bits + 64 * h, word);
    }
  }
}

// Packs rows [first, first + count) (within one panel) of `source` into `packed`.
template <DType kType>
void pack_panel_rows(const uint8_t* source, size_t row_bytes, int64_t per_row, int64_t first, int64_t count,
                     uint8_t* packed) {
  constexpr size_t kBlockBytes = kType == DType::Q8_0   ? sizeof(BlockQ8_0)
                                 : kType == DType::Q4_0 ? sizeof(BlockQ4_0)
                                 : kType == DType::Q4_K ? sizeof(BlockQ4_K)
                                                        : sizeof(BlockQ6_K);
  constexpr size_t kTileBytes = kQuantPanel * kBlockBytes;
  for (int64_t n = first; n < first + count; ++n) {
    const int64_t panel = n / kQuantPanel;
    const int lane = static_cast<int>(n % kQuantPanel);
    for (int64_t b = 0; b < per_row; ++b) {
      uint8_t* tile = packed + static_cast<size_t>(panel * per_row + b) * kTileBytes;
      block_into_tile<kType>(source + n * row_bytes + b * kBlockBytes, tile, lane);
    }
  }
}

void block_from_tile(DType type, const uint8_t* tile, int lane, uint8_t* block) {
  std::memset(block, 0, dtype_block_bytes(type));
  copy_scales(type, const_cast<uint8_t*>(tile), lane, block, false);
  for (int k = 0; k < dtype_block_weights(type); ++k) {
    const LevelSlot slot = tile_level_slot(type, lane, k);
    int level = tile[slot.byte] >> slot.shift;
    if (type != DType::Q8_0) level &= 15;
    if (type == DType::Q6_K) {
      const LevelSlot high = tile_high_bits(lane, k);
      level |= ((tile[high.byte] >> high.shift) & 3) << 4;
    }
    set_block_level(type, block, k, level);
  }
}

}  // namespace

int64_t activation_block(DType weight_dtype) {
  return weight_dtype == DType::Q4_K || weight_dtype == DType::Q6_K ? 256 : 32;
}

DType storable_dtype(DType wanted, int64_t cols) {
  if (!dtype_is_quantized(wanted) || cols % dtype_block_weights(wanted) == 0) return wanted;
  if (cols % 32 == 0) return DType::Q8_0;
  return DType::BF16;
}

std::vector<uint8_t> pack_quantized(const void* blocks, DType type, int64_t rows, int64_t cols) {
  if (!dtype_is_quantized(type))
    throw Error("pack_quantized: " + std::string(dtype_name(type)) + " is not quantized");
  const size_t row_bytes = dtype_row_bytes(type, cols);
  const int64_t per_row = cols / dtype_block_weights(type);
  const size_t tile_bytes = kQuantPanel * dtype_block_bytes(type);
  const int64_t panels = (rows + kQuantPanel - 1) / kQuantPanel;
  std::vector<uint8_t> packed(static_cast<size_t>(panels * per_row) * tile_bytes, 0);
  const auto* source = static_cast<const uint8_t*>(blocks);
  // Panels are disjoint tiles, so they are packed in parallel (a byte copy: any order gives the
  // same bytes).
#pragma omp parallel for schedule(static)
  for (int64_t panel = 0; panel < panels; ++panel) {
    const int64_t first = panel * kQuantPanel, count = std::min(kQuantPanel, rows - first);
    switch (type) {
      case DType::Q8_0:
        pack_panel_rows<DType::Q8_0>(source, row_bytes, per_row, first, count, packed.data());
        break;
      case DType::Q4_0:
        pack_panel_rows<DType::Q4_0>(source, row_bytes, per_row, first, count, packed.data());
        break;
      case DType::Q4_K:
        pack_panel_rows<DType::Q4_K>(source, row_bytes, per_row, first, count, packed.data());
        break;
      default:
        pack_panel_rows<DType::Q6_K>(source, row_bytes, per_row, first, count, packed.data());
        break;
    }
  }
  return packed;
}

void dequantize_packed_row(const WeightMatrix& w, int64_t n, float* out) {
  MB_CHECK(dtype_is_quantized(w.dtype) && n >= 0 && n < w.rows);
  const int64_t block = dtype_block_weights(w.dtype);
  const int64_t per_row = w.cols / block;
  const size_t tile_bytes = kQuantPanel * dtype_block_bytes(w.dtype);
  uint8_t ggml_block[256];
  for (int64_t b = 0; b < per_row; ++b) {
    const auto* tile = static_cast<const uint8_t*>(w.data) +
                       static_cast<size_t>((n / kQuantPanel) * per_row + b) * tile_bytes;
    block_from_tile(w.dtype, tile, static_cast<int>(n % kQuantPanel), ggml_block);
    dequantize_row(w.dtype, ggml_block, block, out + b * block);
  }
}

void quantize_activations(const float* x, int64_t k, int64_t block, int8_t* q, float* scales,
                          int32_t* sums16) {
  MB_CHECK(block % 16 == 0 && k % block == 0);
  for (int64_t b = 0; b < k / block; ++b) {
    const float* xb = x + b * block;
    float amax = 0.0f;
    for (int64_t j = 0; j < block; ++j) amax = std::max(amax, std::fabs(xb[j]));
    const float d = amax / 127.0f;
    const float inverse = d != 0.0f ? 1.0f / d : 0.0f;
    scales[b] = d;
    for (int64_t j = 0; j < block; ++j) {
      // Round to nearest even; a NaN input (or inf * 0) quantizes to 0, its scale carries it.
      const float v = xb[j] * inverse;
      q[b * block + j] =
          std::isnan(v) ? 0 : static_cast<int8_t>(std::nearbyint(std::clamp(v, -127.0f, 127.0f)));
    }
  }
  for (int64_t s = 0; s < k / 16; ++s) {
    int32_t sum = 0;
    for (int j = 0; j < 16; ++j) sum += q[16 * s + j];
    sums16[s] = sum;
  }
}

}  // namespace mb

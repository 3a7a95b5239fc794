// SPDX-License-Identifier: MIT
// Causal self-attention of one round of a sequence against its KV cache (the attention layers of
// the hybrid models: Granite-4.0-H, Nemotron-H), with grouped-query heads and no positional
// encoding (RoPE, for later families, would be applied to q and k before this op).
//
// Row r of a sequence sits at position p = position + r and attends to the keys of positions
// 0..p, which the cache holds before the op runs (the round's own keys are appended first, so a
// position sees itself and every earlier one, whether they came in this round or an earlier one).
// Query head h reads KV head h / (n_heads / n_kv_heads). Per (row, head):
//   s_j = (q . k_j) * scale              j = 0..p, the dot one fixed 16-lane chain over head_dim
//   e_j = exp(s_j - max_j s_j),  w_j = e_j * (1 / sum_j e_j)   (the sum over keys in 16-lane
//                                        blocks at fixed absolute positions, then one tree)
//   y   = sum_j w_j v_j                  one fma chain over j = 0..p per channel
// Every step depends only on the position and the keys, never on which rows share the round, the
// chunk, the batch or the thread count: a position's output is the same bits in a prefill round
// and in a decode step. The CPU kernel works on tiles of queries that share a KV head (a group's
// heads over a few rows) a block of keys at a time, so each key is read once per tile rather than
// once per query; its memory is one tile's rows of scores per thread, never T x T.
#pragma once

#include <cstdint>
#include <span>

#include "core/threading.h"

namespace mb {

struct AttentionParams {
  int64_t n_heads = 0;
  int64_t n_kv_heads = 0;  // divides n_heads
  int64_t head_dim = 0;
  float scale = 1.0f;  // multiplies q . k (1/sqrt(head_dim), or a config's attention multiplier)
  int64_t q_width() const { return n_heads * head_dim; }
  int64_t kv_width() const { return n_kv_heads * head_dim; }
};

// The rows of a KV cache by position: position p's floats start at
// blocks[p / block_positions] + (p % block_positions) * ld. A state keeps its growing parts in
// blocks so that forks share the full ones read-only (backends/backend.h's HostState); one
// contiguous array is the case of a single block at least as long as the positions.
struct PositionRows {
  const float* const* blocks = nullptr;
  int64_t block_positions = 0;
  int64_t ld = 0;
  const float* row(int64_t p) const { return blocks[p / block_positions] + (p % block_positions) * ld; }
};

struct AttentionSequence {
  const float* q = nullptr;  // [rows, ldq]: n_heads x head_dim per row
  int64_t ldq = 0;
  int64_t rows = 0;
  int64_t position = 0;  // the position of row 0
  PositionRows k{};      // [position + rows, kv_width]: the cache, every position so far
  PositionRows v{};      // [position + rows, kv_width]
  float* y = nullptr;    // [rows, ldy]: n_heads x head_dim per row
  int64_t ldy = 0;
};

void attention(const ComputeContext& ctx, const AttentionParams& params,
               std::span<const AttentionSequence> sequences);
// Plain double-precision reference (tests only).
void attention_reference(const AttentionParams& params, const AttentionSequence& sequence);

}  // namespace mb

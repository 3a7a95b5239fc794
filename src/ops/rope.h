// SPDX-License-Identifier: MIT
// Rotary position embedding (RoPE) of an attention layer's queries and keys, in the NeoX /
// rotate_half form over the whole head (transformers' LlamaRotaryEmbedding with the default rope
// type, which GraniteMoeHybrid uses for the all-attention Granite-4.0 models, and Falcon-H1).
//
// Row r of a sequence sits at absolute position p = position + r. Per head of q and of k, with
// rot = rotary_dims (head_dim when 0), half = rot / 2 and i = 0..half-1:
//   inv_freq_i = 1 / theta^(2i / rot)                         in double (std::pow)
//   c_i = f32(cos(p * inv_freq_i)),  s_i = f32(sin(p * inv_freq_i))   the angle and both
//                                        functions in double (std::cos, std::sin), rounded once
//   y_i        = x_i * c_i - x_{i+half} * s_i                 in f32: two products, then the
//   y_{i+half} = x_{i+half} * c_i + x_i * s_i                 difference or sum (never an fma)
// Channels rot..head_dim-1 of each head pass through unchanged. That is transformers'
// partial_rotary_factor (rot = head_dim x factor: Bamba's 0.5): apply_rotary_pos_emb rotates
// q[..., :rot] with rotate_half inside those rot channels, so channel i pairs with i + rot / 2,
// not with i + head_dim / 2 (llama.cpp's pairing for a permuted granitehybrid file, which differs;
// README).
// A rotated value depends only on its own two inputs and its position: never on the other rows
// of the round, the batch, the chunk, the thread count or the instruction set (c_i and s_i are
// computed by one scalar function, compiled once, for every instruction set), so a key rotated
// when its position is appended to the cache in a prefill round has the bits a decode step gives
// it. transformers computes inv_freq and the angle in f32 and cos/sin of the f32 angle; ours are
// the double values rounded once, which is closer to the exact rotation (README: how far apart).
#pragma once

#include <cstdint>
#include <span>

#include "core/threading.h"

namespace mb {

struct RopeParams {
  int64_t head_dim = 0;    // the stride of a head's channels
  double theta = 10000.0;  // the config's rope_theta
  int64_t n_heads = 0;     // heads of q
  int64_t n_kv_heads = 0;  // heads of k
  // The first rotary_dims channels of each head are rotated (even, at most head_dim); 0: all of
  // them (head_dim, which must then be even).
  int64_t rotary_dims = 0;

  int64_t rotated() const { return rotary_dims > 0 ? rotary_dims : head_dim; }
};

// One sequence's rows of the round, rotated in place.
struct RopeSequence {
  float* q = nullptr;  // [rows, ldq]: n_heads x head_dim per row
  int64_t ldq = 0;
  float* k = nullptr;  // [rows, ldk]: n_kv_heads x head_dim per row
  int64_t ldk = 0;
  int64_t rows = 0;
  int64_t position = 0;  // the absolute position of row 0
};

void rope(const ComputeContext& ctx, const RopeParams& params, std::span<const RopeSequence> sequences);
// The rotation's f32 factors at `position`: cos_out and sin_out get rotated() / 2 floats each.
void rope_factors(const RopeParams& params, int64_t position, float* cos_out, float* sin_out);
// Plain double-precision reference (tests only): the angle, cos, sin and the rotation in double,
// each output rounded to f32 once.
void rope_reference(const RopeParams& params, const RopeSequence& sequence);

}  // namespace mb

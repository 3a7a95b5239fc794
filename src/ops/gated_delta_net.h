// SPDX-License-Identifier: MIT
// The Gated DeltaNet core of Qwen3.5 / Qwen3.6 / Qwen3-Next's linear-attention layers (HF
// Qwen3_5GatedDeltaNet with torch_recurrent_gated_delta_rule; ../shared/specs/gated-deltanet.md
// section 4.2), between the causal conv + SiLU (ops/causal_conv.h) and the gated norm. Per
// position t, with nk key heads and nv value heads (nv a multiple of nk) of dk and dv channels:
//   q, k = the conv outputs' q [nk dk] and k [nk dk] columns; v = its v [nv dv] columns
//   q_h = q_h * rsqrt(sum q_h^2 + l2_eps) * dk^-0.5;  k_h = k_h * rsqrt(sum k_h^2 + l2_eps)
//   beta = sigmoid(b);  g = a_neg * softplus(a + dt_bias)        (a_neg = -exp(A_log), per head)
//   for value head h, reading key head kh = h / (nv / nk)  (grouped: HF's repeat_interleave)
//                                     or kh = h % nk         (tiled: llama.cpp's Qwen3.5 GGUFs)
//     S_h = exp(g_h) S_h                         decay first
//     u   = S_h^T k_kh                           read the decayed memory   [dv]
//     d   = beta_h (v_h - u)                     delta rule
//     S_h = S_h + k_kh d^T                       write
//     o_h = S_h^T q_kh                           query the new state       [dv]
// The kernel takes exp(max(g, -44)): a decay below e^-44 wipes the state either way, and the
// floor keeps decayed states out of the slow subnormal range (ops/cpu/gdn_kernels.inc).
// S_h is [dk, dv] in f32, stored transposed (for each of the dv columns its dk entries
// contiguous), so the read and the query are dot products over dk and the write an axpy.
//
// Exactness: each (sequence, value head) runs its positions in order on one thread with one
// fixed reduction order per dot product, the same for one position as for many, so T positions
// in one call equal T calls of one position bit for bit, and the result does not depend on the
// thread count, the batch or the instruction set. The sequential recurrence is the only order
// (a chunked WY form would be an opt-in with a stated tolerance, as Mamba-3's).
#pragma once

#include <cstdint>
#include <span>

#include "core/threading.h"

namespace mb {

struct GatedDeltaNetParams {
  int64_t n_key_heads = 0;         // nk
  int64_t n_value_heads = 0;       // nv, a multiple of nk
  int64_t key_dim = 0;             // dk
  int64_t value_dim = 0;           // dv
  bool tiled_heads = false;        // value head h reads key head h % nk instead of h / (nv / nk)
  const float* a_neg = nullptr;    // [nv] = -exp(A_log)
  const float* dt_bias = nullptr;  // [nv]
  float l2_eps = 1e-6f;            // HF's l2norm: x * rsqrt(sum x^2 + eps)

  // Width of the conv output row: q [nk dk] | k [nk dk] | v [nv dv].
  int64_t conv_width() const { return 2 * n_key_heads * key_dim + n_value_heads * value_dim; }
  // Floats of one sequence's matrix state: [nv, dv, dk].
  int64_t state_floats() const { return n_value_heads * value_dim * key_dim; }
};

// One sequence's positions for one layer.
struct GatedDeltaNetSequence {
  int64_t length = 0;
  const float* qkv = nullptr;  // [length, ldqkv] conv + SiLU outputs: q | k | v
  int64_t ldqkv = 0;
  const float* b = nullptr;  // [length, ldb] raw beta inputs (in_proj_b), nv per row
  int64_t ldb = 0;
  const float* a = nullptr;  // [length, lda] raw decay inputs (in_proj_a), nv per row
  int64_t lda = 0;
  float* state = nullptr;  // [nv, dv, dk], read and updated
  float* y = nullptr;      // [length, ldy] outputs o (nv dv columns), before the gated norm
  int64_t ldy = 0;
};

// Work is split over (sequence, value head) pairs.
void gated_delta_net(const ComputeContext& ctx, const GatedDeltaNetParams& params,
                     std::span<const GatedDeltaNetSequence> sequences);

// Plain double-precision evaluation (tests only compare against it): every product and sum in
// double, the state kept in double during the call and stored to the f32 state once at the end.
void gated_delta_net_reference(const GatedDeltaNetParams& params, const GatedDeltaNetSequence& sequence);

}  // namespace mb

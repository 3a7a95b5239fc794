// SPDX-License-Identifier: MIT
// The CPU entry point of the rotary position embedding (ops/rope.h): the rotation's factors of
// each row in scalar double code, compiled once for every instruction set, then the rotation in
// f32 by the kernel of the context's instruction set (hybrid_kernels.inc).
#include <cmath>
#include <vector>

#include "core/error.h"
#include "ops/cpu/vec16.h"
#include "ops/rope.h"

namespace mb {
namespace {

// Per calling thread, so concurrent forward calls never share it; the kernel's worker threads
// only read it. [rows, rot]: each row's cos factors, then its sin factors.
thread_local std::vector<float> factor_rows;

}  // namespace

void rope_factors(const RopeParams& p, int64_t position, float* cos_out, float* sin_out) {
  const int64_t rot = p.rotated(), half = rot / 2;
  const double pos = static_cast<double>(position);
  for (int64_t i = 0; i < half; ++i) {
    // transformers' inv_freq = 1 / theta^(arange(0, dim, 2) / dim), here in double. The angle
    // and its cos and sin are in double too, each factor rounded to f32 once: the same call on
    // every instruction set, so the factors never depend on which one runs the rotation.
    const double inv_freq = 1.0 / std::pow(p.theta, static_cast<double>(2 * i) / static_cast<double>(rot));
    const double angle = pos * inv_freq;
    cos_out[i] = static_cast<float>(std::cos(angle));
    sin_out[i] = static_cast<float>(std::sin(angle));
  }
}

void rope(const ComputeContext& ctx, const RopeParams& p, std::span<const RopeSequence> sequences) {
  const int64_t hd = p.head_dim, rot = p.rotated(), half = rot / 2;
  MB_CHECK(hd > 0 && rot > 0 && rot % 2 == 0 && rot <= hd && p.n_heads >= 0 && p.n_kv_heads >= 0);
  MB_CHECK(std::isfinite(p.theta) && p.theta > 0.0);
  const cpu::KernelTable& kernels = cpu::kernels_for(ctx.isa);
  for (const RopeSequence& s : sequences) {
    MB_CHECK(s.rows >= 0 && s.position >= 0);
    if (s.rows == 0) continue;
    MB_CHECK(p.n_heads == 0 || (s.q != nullptr && s.ldq >= p.n_heads * hd));
    MB_CHECK(p.n_kv_heads == 0 || (s.k != nullptr && s.ldk >= p.n_kv_heads * hd));
    if (static_cast<int64_t>(factor_rows.size()) < s.rows * rot)
      factor_rows.resize(static_cast<size_t>(s.rows * rot));
    float* factors = factor_rows.data();
    // Each row's factors are its own: filling them in parallel changes no bit.
#pragma omp parallel for schedule(static) num_threads(ctx.n_threads) if (ctx.n_threads > 1 && s.rows > 8)
    for (int64_t r = 0; r < s.rows; ++r)
      rope_factors(p, s.position + r, factors + r * rot, factors + r * rot + half);
    if (p.n_heads > 0) kernels.rope_rotate(s.q, s.ldq, s.rows, p.n_heads, hd, rot, factors, ctx.n_threads);
    if (p.n_kv_heads > 0)
      kernels.rope_rotate(s.k, s.ldk, s.rows, p.n_kv_heads, hd, rot, factors, ctx.n_threads);
  }
}

}  // namespace mb

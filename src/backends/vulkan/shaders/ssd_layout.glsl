// SPDX-License-Identifier: MIT
// The scratch of the chunked SSD form (ssd_prep_*.glsl, ssd_gemm.comp, ssd_pass.glsl): one block
// of floats per (chunk, head) "batch" of the op, laid out for chunks of L positions whatever the
// chunk's own length Lc <= L (N states, P channels):
//   Q     [L][N]  the queries q_i (Mamba-2: C_i)
//   Kt    [N][L]  the scaled keys k~_s, transposed (Mamba-2: dt_s B_s)
//   Ktw   [N][L]  k~_s exp(cum_last - cum_s): the chunk's state-passing weights
//   V     [L][P]  the values v_s (x)
//   M     [L][L]  the causal decayed q.k~ products
//   Intra [L][P]  their products with V
//   dH    [N][P]  the chunk's own contribution to the state it passes on
//   Hent  [N][P]  the state entering the chunk
//   Rows  [L][8]  per position: cum (the inclusive cumulative log-decay), exp(cum), diag (the
//                 coefficient of v_i in y_i), dt, exp(cum_last - cum), and Mamba-3's lambda
//   Chunk [4]     exp(cum_last); Mamba-3's boundary-fold factor of a window's first chunk and
//                 the sigma of the chunk's last position
//   Ypre  [L][P]  Mamba-3's outputs before the gate
//   Kraw  [L][N]  Mamba-3's keys k_i before their scale (rotated)
// The host computes the same block size (vulkan_ssm_ops.cc's plan_ssd). Two tables come staged
// from the host: per chunk g (chunks_at + 4 g) its part, first round row, length and flags; per
// part (parts_at + 4 p) its first chunk, chunk count, first row and row count.
#ifndef SSD_LAYOUT_GLSL
#define SSD_LAYOUT_GLSL

const uint kWindowStart = 1u;  // the chunk opens a window (Mamba-3's boundary fold precedes it)
const uint kWindowEnd = 2u;    // the chunk closes a window (Mamba-3's sigma of its last position is 0)

// Rows' fields.
const uint kRowCum = 0u, kRowExpCum = 1u, kRowDiag = 2u, kRowDt = 3u, kRowWeight = 4u, kRowLambda = 5u;
const uint kRowFloats = 8u;

struct SsdLayout {
  uint q, kt, ktw, v, m, intra, dh, hent, rows, chunk, ypre, kraw, batch;
};

SsdLayout ssd_layout(uint L, uint N, uint P) {
  SsdLayout s;
  s.q = 0u;
  s.kt = s.q + L * N;
  s.ktw = s.kt + N * L;
  s.v = s.ktw + N * L;
  s.m = s.v + L * P;
  s.intra = s.m + L * L;
  s.dh = s.intra + L * P;
  s.hent = s.dh + N * P;
  s.rows = s.hent + N * P;
  s.chunk = s.rows + kRowFloats * L;
  s.ypre = s.chunk + 4u;
  s.kraw = s.ypre + L * P;
  s.batch = s.kraw + L * N;
  return s;
}

#endif

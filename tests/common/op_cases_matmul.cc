// SPDX-License-Identifier: MIT
// Matmul cases: f32, bf16 and f16 weights and the quantized formats, over row counts on both sides
// of Vulkan's decode/tiled switch (8 | 9) and of a 128-row tile, outputs short of, between and past
// whole 64-wide panels, depths short of, between and past a 16-deep slice and the CPU kernel's
// spans of K, every epilogue (bias,
// accumulate, softplus) and the RMSNorm prologue, with operands at offsets and row strides wider
// than the rows.
#include <string>

#include "common/op_cases.h"
#include "common/test_util.h"
#include "ops/matmul.h"
#include "ops/quant.h"
#include "ops/quant_matmul.h"
#include "ops/rms_norm.h"

namespace mb::test {
namespace {

struct MatmulShape {
  int64_t m, n, k;
  DType dtype;
  bool bias = false, accumulate = false, softplus = false;
  bool norm = false;        // the RMSNorm prologue (NormPrologue)
  bool alone = false;       // each row also as a product of its own, which must give the same bits
  bool contiguous = false;  // x and y at offset 0 with row strides equal to their widths
};

std::string describe(const MatmulShape& s) {
  return "m=" + std::to_string(s.m) + " n=" + std::to_string(s.n) + " k=" + std::to_string(s.k) + " " +
         std::string(dtype_name(s.dtype)) + (s.bias ? " bias" : "") + (s.accumulate ? " accumulate" : "") +
         (s.softplus ? " softplus" : "") + (s.norm ? " norm" : "") + (s.alone ? " rows_alone" : "") +
         (s.contiguous ? " contiguous" : "");
}

// x as the quantized kernels see it: each row's activation blocks quantized (quantize_activations),
// then widened back, so the reference measures the kernel's own arithmetic.
std::vector<float> quantized_rows(const float* x, int64_t ldx, int64_t m, int64_t k, int64_t block) {
  std::vector<float> out(static_cast<size_t>(m * k));
  std::vector<int8_t> q(k);
  std::vector<float> scales(k / block);
  std::vector<int32_t> sums(k / 16);
  for (int64_t r = 0; r < m; ++r) {
    quantize_activations(x + r * ldx, k, block, q.data(), scales.data(), sums.data());
    for (int64_t i = 0; i < k; ++i) out[r * k + i] = static_cast<float>(q[i]) * scales[i / block];
  }
  return out;
}

void matmul_body(const MatmulShape& s, OpRun& run) {
  const Rows x_rows = s.contiguous ? Rows{0, s.m, s.k, s.k} : Rows{3, s.m, s.k, s.k + 2};
  const Rows y_rows = s.contiguous ? Rows{0, s.m, s.n, s.n} : Rows{7, s.m, s.n, s.n + 3};
  const std::vector<float> y0 = random_floats(s.m * s.n, 4);
  const TensorId x = run.tensor("x", x_rows, random_floats(s.m * s.k, 2, 3.0f));
  const TensorId y = run.tensor("y", y_rows, y0);
  run.writes(y, Check::Nmse);
  TensorId y_alone{}, scratch{};
  if (s.alone) {
    y_alone = run.tensor("y of rows alone", y_rows, y0);
    run.writes(y_alone, Check::Nmse);
    run.same_bits(y, y_alone);
  }
  if (s.norm) {
    // Where a backend that runs the prologue as its own op puts the normalized rows.
    scratch = run.tensor("norm scratch", {1, s.m, s.k}, random_floats(s.m * s.k, 6));
    run.writes(scratch, Check::Scratch);
  }
  const MatrixId w = run.matrix(s.dtype, s.n, s.k, random_floats(s.n * s.k, 1));
  const WeightsId bias = run.weights(random_floats(s.n, 3), 3);
  const WeightsId norm = run.weights(random_floats(s.k, 5), 1);

  run.round([&](const Backend& backend, Stream& stream) {
    MatmulOp op;
    op.x = run.view(x);
    op.m = s.m;
    op.w = run.matrix(w);
    op.bias = s.bias ? run.view(bias) : View{};
    op.y = run.view(y);
    op.accumulate = s.accumulate;
    op.softplus = s.softplus;
    if (s.norm) op.norm = {run.view(norm), 1e-5f, run.view(scratch)};
    backend.matmul(stream, op);
    for (int64_t r = 0; s.alone && r < s.m; ++r) {
      MatmulOp row = op;
      row.x = op.x.row(r);
      row.m = 1;
      row.y = run.view(y_alone).row(r);
      if (s.norm) row.norm.scratch = op.norm.scratch.row(r);
      backend.matmul(stream, row);
    }
  });
  run.reference([&] {
    const float* xs = run.host(x);
    int64_t ldx = x_rows.ld;
    std::vector<float> normed, quantized;
    if (s.norm) {
      normed.resize(s.m * s.k);
      rms_norm_reference({xs, ldx, s.m, s.k, run.host(norm), 1e-5f, normed.data(), s.k});
      xs = normed.data();
      ldx = s.k;
    }
    if (dtype_is_quantized(s.dtype)) {
      quantized = quantized_rows(xs, ldx, s.m, s.k, activation_block(s.dtype));
      xs = quantized.data();
      ldx = s.k;
    }
    for (TensorId out : s.alone ? std::vector<TensorId>{y, y_alone} : std::vector<TensorId>{y})
      matmul_reference({xs, ldx, s.m, run.host(w), s.bias ? run.host(bias) : nullptr, run.host(out),
                        y_rows.ld, s.accumulate, s.softplus});
  });
}

void add(std::vector<OpCase>& cases, const MatmulShape& s, double tolerance = kFloatNmse) {
  cases.push_back({"matmul", describe(s), tolerance, {{OpKind::Matmul, s.dtype}}, false, [s](OpRun& run) {
                     matmul_body(s, run);
                   }});
}

}  // namespace

void add_matmul_cases(std::vector<OpCase>& cases) {
  using enum DType;
  // The CPU kernel's sweep: single outputs, depths past a 768-wide row, every epilogue; each row
  // alone gives the bits it has in the product (a decode step equals its row of a prefill).
  for (MatmulShape s : std::vector<MatmulShape>{{1, 1, 1, F32},
                                                {1, 17, 15, F32, true},
                                                {5, 33, 16, BF16, true, true},
                                                {7, 9, 33, F16, false, true},
                                                {13, 70, 100, F32, true},
                                                {4, 8, 768, BF16},
                                                {9, 130, 47, F16, true, true},
                                                {1, 200, 33, F32, true, true},
                                                {20, 64, 5, BF16},
                                                {7, 129, 64, F32, false, true},
                                                {11, 100, 48, F32, true, false, true},
                                                {8, 37, 48, BF16, true, false, true}}) {
    s.alone = s.m > 1;
    add(cases, s);
  }
  // Depths of 1, 7, 64 and 777 (bf16 at 7, f16 at 64), each at two of 1, 3 and 17 rows, rotating
  // the epilogues.
  const int64_t depths[] = {1, 7, 64, 777}, row_counts[] = {1, 3, 17};
  for (int d = 0; d < 4; ++d) {
    for (int r = 0; r < 3; ++r) {
      if ((d + r) % 3 == 2) continue;
      const int64_t k = depths[d], m = row_counts[r];
      add(cases, {m, k == 777 ? 70 : 130, k, k == 7 ? BF16 : (k == 64 ? F16 : F32), m != 3, m == 17, m == 3});
    }
  }
  add(cases, {5, 64, 33, BF16, true, true});
  add(cases, {2, 1, 9, F16, true, false, true});
  add(cases, {3, 37, 16, BF16, false, false, false, false, false, true});
  // Vulkan's tiled shader: every dtype meets row counts on both sides of its thresholds, outputs
  // of 1, 100 and 200, depths of 1, 3, 65 and 200, and the epilogues rotate.
  const DType dtypes[] = {F32, BF16, F16};
  const int64_t ns[] = {1, 100, 200}, ks[] = {1, 3, 65, 200};
  int index = 0;
  for (int64_t m : {1, 8, 9, 65, 130}) {
    for (DType dtype : dtypes) {
      const int flags = index % 4;  // none, bias, bias + softplus, accumulate
      add(cases, {m, ns[index % 3], ks[index % 4], dtype, flags >= 1 && flags <= 2, flags == 3, flags == 2,
                  false, false, index % 5 == 0});
      ++index;
    }
  }
  // A model-sized depth (130m's d_model) over a partial tile of rows.
  add(cases, {130, 100, 768, BF16, true});
  add(cases, {33, 70, 768, F32, false, true});
  // Depths the CPU kernel runs in spans (512 deep for f32, 1024 for bf16 and f16), the last span
  // partial, with a row count that leaves a partial row tile and one (300 rows of f32) that splits
  // into two row blocks; every row alone, unspanned as a decode step, must give the same bits.
  add(cases, {13, 70, 1100, F32, true, true, false, false, true});
  add(cases, {8, 130, 2100, BF16, true, false, true, false, true});
  add(cases, {7, 65, 1030, F16, false, false, false, false, true});
  add(cases, {300, 40, 600, F32, true, false, false, false, true});
  // The RMSNorm prologue: lane sums short of 16 lanes (k = 1, 3) and past them (17, 65, 768), in
  // the decode shader (m <= 8) and the tiled one (m >= 9); every row alone as a decode step too.
  const int64_t norm_ks[] = {1, 3, 17, 65, 768};
  index = 0;
  for (int64_t m : {1, 5, 8, 9, 63, 130}) {
    for (DType dtype : dtypes) {
      if ((m == 5 || m == 63) && dtype != BF16) continue;
      add(cases, {m, index % 2 ? 100 : 64, norm_ks[index % 5], dtype, index % 3 != 0, index % 3 == 2, false,
                  true, m > 1 && m <= 9});
      ++index;
    }
  }
}

// Quantized weights: each format over activation-block counts of 1 to 32, outputs short of and
// past a 16-wide panel, rows past a 64-row block (70) and a K-quant 256-row block walked in spans
// of K (300 rows, 3 K-quant blocks: a span and a half), every epilogue and the norm prologue (in
// decode-sized and prefill-sized products). The
// reference sees the activations as the kernel quantizes them, so the tolerance is the float one.
void add_quant_matmul_cases(std::vector<OpCase>& cases) {
  using enum DType;
  for (DType type : {Q8_0, Q4_0, Q4_K, Q6_K}) {
    const bool small_blocks = dtype_block_weights(type) == 32;
    const int64_t k = small_blocks ? 96 : 512;
    add(cases, {1, 33, k, type, false, false, false, false, false, true});
    add(cases, {17, 40, k, type, true, false, false, false, true});
    add(cases, {70, 16, k, type, false, true});
    add(cases, {5, 20, k, type, true, false, true});
    add(cases, {3, 17, 256, type, false, false, false, false, true});
    add(cases, {17, 1, 1024, type, true});
    add(cases, {9, 40, 256, type, true, true, false, true});
    if (small_blocks) {
      add(cases, {1, 40, 32, type, true});
      add(cases, {3, 1, 32, type, false, true});
    }
    // Vulkan walks K in steps of 256 weights: several steps (17 blocks of 32: a partial third
    // step; three K-quant blocks: both halves of its double-buffered sums) in the GEMV with the
    // norm prologue, each row alone too, and in the tiled GEMM over a second tile of rows.
    const int64_t steps_k = small_blocks ? 544 : 768;
    add(cases, {6, 24, steps_k, type, true, false, false, true, true});
    add(cases, {66, 17, steps_k, type, false, true, false, true});
    add(cases, {300, 20, steps_k, type, true});
  }
}

}  // namespace mb::test

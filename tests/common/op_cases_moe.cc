// SPDX-License-Identifier: MIT
// Cases of the mixture-of-experts op (ops/moe.h): the three scorings, top-k of 1 and 6 and all
// experts, expert counts and widths that are multiples of nothing (5, 7, 9 experts; d_model 24 and
// 40; widths 20 and 33), more experts than rows (experts no row chooses), router scores tied on
// purpose (two experts with the same router row, or every score equal), the accumulating form,
// every float storage dtype and the quantized ones, and each row also routed on its own, which must
// give the bits it has in the block (a decode step equals its row of a prefill); latent experts,
// whose input and sums are narrower or wider than the router's rows.
#include <string>

#include "common/op_cases.h"
#include "common/test_util.h"
#include "ops/moe.h"
#include "ops/quant.h"

namespace mb::test {
namespace {

enum class Ties {
  None,
  TwoExperts,  // experts 1 and 3 share a router row (and a correction bias), made the largest
  All,         // every router weight is 0: every score ties, the choice is experts 0..k-1
};

struct MoeShape {
  int64_t m, d, experts, top_k, width;
  Activation activation;
  MoeScoring scoring;
  bool normalize = false;
  float scale = 1.0f;
  DType dtype = DType::F32;
  Ties ties = Ties::None;
  bool accumulate = false;
  int64_t latent = 0;                    // the experts' width (MoeParams::latent); 0: d
  float norm_epsilon = kMoeNormEpsilon;  // LFM2-MoE's 1e-6, or a large one that shows it is used
};

std::string describe(const MoeShape& s) {
  const char* ties[] = {"", " tied_pair", " tied_all"};
  return "m=" + std::to_string(s.m) + " d=" + std::to_string(s.d) + " experts=" + std::to_string(s.experts) +
         " top_k=" + std::to_string(s.top_k) + " width=" + std::to_string(s.width) + " " +
         activation_name(s.activation) + " " + moe_scoring_name(s.scoring) +
         (s.normalize ? " normalize" : "") + (s.scale != 1.0f ? " scaled" : "") + " " +
         std::string(dtype_name(s.dtype)) + ties[static_cast<int>(s.ties)] +
         (s.accumulate ? " accumulate" : "") + (s.latent > 0 ? " latent=" + std::to_string(s.latent) : "") +
         (s.norm_epsilon != kMoeNormEpsilon ? " norm_eps=" + std::to_string(s.norm_epsilon) : "");
}

std::vector<float> router_values(const MoeShape& s) {
  std::vector<float> w = random_floats(s.experts * s.d, 11, 0.5f);
  if (s.ties == Ties::All) return std::vector<float>(w.size(), 0.0f);
  if (s.ties == Ties::TwoExperts) {
    // Expert 1's row, scaled up so the pair leads many rows, copied to expert 3: their scores are
    // the same bits in every row, and the lower index must come first.
    for (int64_t c = 0; c < s.d; ++c) w[s.d + c] *= 4.0f;
    std::copy(w.begin() + s.d, w.begin() + 2 * s.d, w.begin() + 3 * s.d);
  }
  return w;
}

void moe_body(const MoeShape& s, OpRun& run) {
  const MoeParams p{s.d,       s.experts,   s.top_k, s.width,  s.activation,
                    s.scoring, s.normalize, s.scale, s.latent, s.norm_epsilon};
  const int64_t k = s.top_k, up_rows = p.up_rows(), de = p.expert_dim();
  const Rows x_rows{2, s.m, s.d, s.d + 3};
  const Rows xe_rows{0, s.m, de, de + 1};
  const Rows y_rows{1, s.m, de, de + 2};
  const std::vector<float> y0 = random_floats(s.m * de, 4);
  const TensorId x = run.tensor("x", x_rows, random_floats(s.m * s.d, 3, 2.0f));
  const TensorId xe = s.latent > 0 ? run.tensor("latent x", xe_rows, random_floats(s.m * de, 8, 2.0f)) : x;
  const TensorId y = run.tensor("y", y_rows, y0);
  run.writes(y, Check::Nmse);
  // Each row also routed on its own, into y_alone.
  const TensorId y_alone = run.tensor("y of rows alone", y_rows, y0);
  run.writes(y_alone, Check::Nmse);
  run.same_bits(y, y_alone);
  const TensorId logits = run.tensor("logits", {0, s.m, s.experts}, random_floats(s.m * s.experts, 5));
  run.writes(logits, Check::Bits);
  const TensorId routes = run.tensor("routes", {3, s.m, 2 * k, 2 * k + 1}, random_floats(s.m * 2 * k, 6));
  run.writes(routes, Check::Exact, 0, s.m, 0, k, "chosen experts");
  run.writes(routes, Check::Nmse, 0, s.m, k, k, "weights");
  std::vector<TensorId> scratch;
  for (const auto& [name, width] : std::vector<std::pair<const char*, int64_t>>{
           {"gathered rows", de}, {"hidden", up_rows}, {"expert out", de}, {"sums", de}}) {
    scratch.push_back(run.tensor(name, {1, s.m, width, width + 1}, random_floats(s.m * width, 7)));
    run.writes(scratch.back(), Check::Scratch);
  }
  const MatrixId router = run.matrix(DType::F32, s.experts, s.d, router_values(s));
  std::vector<float> bias = random_floats(s.experts, 12, 0.05f);
  if (s.ties == Ties::TwoExperts) bias[3] = bias[1];
  if (s.ties == Ties::All) bias.assign(bias.size(), 0.0f);
  const WeightsId correction = run.weights(bias, 2);
  std::vector<MatrixId> up, down;
  for (int64_t e = 0; e < s.experts; ++e) {
    up.push_back(run.matrix(s.dtype, up_rows, de, random_floats(up_rows * de, 100 + e, 0.4f)));
    down.push_back(run.matrix(s.dtype, de, s.width, random_floats(de * s.width, 200 + e, 0.4f)));
  }
  const bool biased = s.scoring == MoeScoring::SigmoidBias;

  run.round([&](const Backend& backend, Stream& stream) {
    std::vector<Matrix> ups, downs;
    for (int64_t e = 0; e < s.experts; ++e) {
      ups.push_back(run.matrix(up[e]));
      downs.push_back(run.matrix(down[e]));
    }
    MoeOp op;
    op.params = p;
    op.x = run.view(x);
    if (s.latent > 0) op.xe = run.view(xe);
    op.m = s.m;
    op.router = run.matrix(router);
    op.correction_bias = biased ? run.view(correction) : View{};
    op.up = ups;
    op.down = downs;
    op.y = run.view(y);
    op.accumulate = s.accumulate;
    op.logits = run.view(logits);
    op.routes = run.view(routes);
    op.rows = run.view(scratch[0]);
    op.hidden = run.view(scratch[1]);
    op.out = run.view(scratch[2]);
    op.acc = run.view(scratch[3]);
    backend.moe(stream, op);
    for (int64_t r = 0; r < s.m; ++r) {
      MoeOp row = op;
      row.x = op.x.row(r);
      if (s.latent > 0) row.xe = op.xe.row(r);
      row.m = 1;
      row.y = run.view(y_alone).row(r);
      row.logits = op.logits.row(r);
      row.routes = op.routes.row(r);
      backend.moe(stream, row);
    }
  });
  run.reference([&] {
    std::vector<WeightMatrix> ups, downs;
    for (int64_t e = 0; e < s.experts; ++e) {
      ups.push_back(run.host(up[e]));
      downs.push_back(run.host(down[e]));
    }
    const MoeWeights w{run.host(router), biased ? run.host(correction) : nullptr, ups, downs};
    for (TensorId out : {y, y_alone}) {
      MoeArgs args{run.host(x), x_rows.ld, s.m, run.host(out), y_rows.ld, s.accumulate};
      if (s.latent > 0) {
        args.xe = run.host(xe);
        args.ldxe = xe_rows.ld;
      }
      moe_reference(p, w, args, run.host(routes), run.rows(routes).ld);
    }
    // The logits are a by-product the reference does not keep: the baseline's bits are checked.
  });
}

}  // namespace

void add_moe_cases(std::vector<OpCase>& cases) {
  using enum Activation;
  using enum MoeScoring;
  using enum DType;
  // Granite's form (SwiGLU experts, softmax over the chosen logits), Nemotron-3's (ReLU^2 experts,
  // sigmoid with a correction bias, normalized, scaled by 2.5) and Jamba's (softmax over all).
  std::vector<MoeShape> shapes = {
      {1, 24, 5, 1, 20, SwiGlu, SoftmaxTopK},
      {7, 24, 5, 2, 20, SwiGlu, SoftmaxTopK, false, 1.0f, BF16},
      {13, 40, 9, 6, 33, ReluSquared, SigmoidBias, true, 2.5f, F32, Ties::None, true},
      {9, 40, 9, 6, 33, ReluSquared, SigmoidBias, true, 2.5f, F16},
      {6, 17, 7, 2, 9, SwiGlu, SoftmaxAll},
      {5, 16, 4, 4, 16, ReluSquared, SoftmaxAll, true},
      // More experts than rows x top_k: most experts get no rows.
      {3, 24, 16, 1, 20, ReluSquared, SigmoidBias, true, 2.5f},
      // Tied scores: the pair (top-1, so the lower index must win; top-2, so both in index order).
      {11, 24, 5, 1, 20, SwiGlu, SoftmaxTopK, false, 1.0f, F32, Ties::TwoExperts},
      {11, 24, 5, 2, 20, ReluSquared, SigmoidBias, true, 2.5f, F32, Ties::TwoExperts, true},
      {8, 24, 6, 1, 12, SwiGlu, SoftmaxAll, false, 1.0f, F32, Ties::TwoExperts},
      {4, 24, 9, 6, 12, ReluSquared, SigmoidBias, true, 2.5f, F32, Ties::All},
      {4, 24, 5, 3, 12, SwiGlu, SoftmaxTopK, false, 1.0f, F32, Ties::All},
      // Quantized experts (depths whole blocks of each format).
      {6, 64, 5, 2, 32, SwiGlu, SoftmaxTopK, false, 1.0f, Q8_0},
      {5, 96, 6, 3, 64, ReluSquared, SigmoidBias, true, 2.5f, Q4_0, Ties::None, true},
      {3, 256, 3, 2, 256, SwiGlu, SoftmaxTopK, false, 1.0f, Q4_K},
      // Latent experts (Nemotron-3-Super): narrower than the router's rows, and wider; quantized.
      {9, 40, 7, 3, 20, ReluSquared, SigmoidBias, true, 2.5f, F32, Ties::None, true, 24},
      {5, 24, 5, 2, 12, ReluSquared, SigmoidBias, true, 2.5f, BF16, Ties::None, false, 33},
      {4, 40, 6, 2, 64, ReluSquared, SigmoidBias, true, 2.5f, Q8_0, Ties::None, false, 64},
      // LFM2-MoE's form (SwiGLU experts, sigmoid with the expert bias, normalized with + 1e-6), and
      // an epsilon large enough that leaving it out would fail.
      {7, 24, 8, 2, 20, SwiGlu, SigmoidBias, true, 1.0f, F32, Ties::None, true, 0, 1e-6f},
      {5, 24, 8, 3, 20, SwiGlu, SigmoidBias, true, 1.0f, BF16, Ties::None, false, 0, 0.5f},
  };
  for (const MoeShape& s : shapes)
    cases.push_back({"moe", describe(s), kFloatNmse, {{OpKind::Moe, s.dtype}}, false, [s](OpRun& run) {
                       moe_body(s, run);
                     }});
}

}  // namespace mb::test

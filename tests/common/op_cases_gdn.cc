// SPDX-License-Identifier: MIT
// The Gated DeltaNet op (ops/gated_delta_net.h) over the parts of a round: parts of 1, 5 and 17
// rows whose rows are not adjacent, each part's matrix state at an offset of its own state and
// non-zero at the start; key and value heads of 16 and other widths (dk != dv, a partial last
// vector), fewer key heads than value heads in both mappings (grouped and tiled). Cases with
// pieces also run the same positions a few per round, carrying the states, and must give the bits
// of the whole round: a prefill equals its decode steps.
#include <cmath>
#include <string>

#include "common/op_cases.h"
#include "common/test_util.h"
#include "ops/gated_delta_net.h"

namespace mb::test {
namespace {

struct GdnShape {
  std::vector<int64_t> lengths;
  int64_t nk, nv, dk, dv;
  bool tiled = false;
  int64_t piece = 0;  // also in rounds of this many positions per part (0: the whole round only)
};

struct GdnRun {
  TensorId y;
  std::vector<StateId> states;
  int64_t piece;
};

GatedDeltaNetParams gdn_case_params(const GdnShape& s, const float* a_neg, const float* dt_bias) {
  GatedDeltaNetParams p;
  p.n_key_heads = s.nk;
  p.n_value_heads = s.nv;
  p.key_dim = s.dk;
  p.value_dim = s.dv;
  p.tiled_heads = s.tiled;
  p.a_neg = a_neg;
  p.dt_bias = dt_bias;
  return p;
}

void gdn_body(const GdnShape& s, OpRun& run) {
  const PartRows layout = part_rows(s.lengths);
  const GatedDeltaNetParams shape = gdn_case_params(s, nullptr, nullptr);
  const int64_t rows = layout.total_rows, width = shape.conv_width(), nv = s.nv, out = s.nv * s.dv;
  const int64_t state_at = 3, state = shape.state_floats();
  // The conv outputs with three spare columns, b and a with one, y with two.
  const int64_t ld = width + 3;
  const TensorId qkv = run.tensor("qkv", {0, rows, width, ld}, random_floats(rows * width, 41));
  const TensorId b = run.tensor("b", {0, rows, nv, nv + 1}, random_floats(rows * nv, 42, 3.0f));
  const TensorId a = run.tensor("a", {0, rows, nv, nv + 1}, random_floats(rows * nv, 43, 3.0f));
  // a_neg = -exp(A_log), A_log in [-2, 2]: decays per step from about 0.1 to 0.999.
  std::vector<float> a_neg = random_floats(nv, 44, 2.0f);
  for (float& x : a_neg) x = -std::exp(x);
  const WeightsId a_neg_w = run.weights(a_neg, 1);
  const WeightsId dt_bias = run.weights(random_floats(nv, 45), 2);
  const std::vector<float> y0 = random_floats(rows * out, 46);
  const Rows y_rows{1, rows, out, out + 2};
  std::vector<GdnRun> runs;
  for (int64_t piece : ways_to_run(s.piece)) {
    const std::string suffix = piece > 0 ? " in pieces" : "";
    const TensorId y = run.tensor("y" + suffix, y_rows, y0);
    writes_parts(run, y, layout, Check::Nmse);
    const auto states = part_states(
        run, "state" + suffix, layout, state_at + state + 2, {{state_at, state, Check::Nmse, "matrix state"}},
        [&](size_t p) { return random_floats(state_at + state + 2, 47 + p, 0.5f); });
    runs.push_back({y, states, piece});
  }
  if (runs.size() == 2) {
    run.same_bits(runs[0].y, runs[1].y);
    run.same_bits(runs[0].states, runs[1].states);
  }
  for (const GdnRun& r : runs) {
    run_parts(run, layout, r.states, r.piece,
              [&](const Backend& backend, Stream& stream, std::span<const Part> parts) {
                GatedDeltaNetOp op;
                op.n_key_heads = s.nk;
                op.n_value_heads = s.nv;
                op.key_dim = s.dk;
                op.value_dim = s.dv;
                op.tiled_heads = s.tiled;
                op.qkv = run.view(qkv);
                op.b = run.view(b);
                op.a = run.view(a);
                op.a_neg = run.view(a_neg_w);
                op.dt_bias = run.view(dt_bias);
                op.state_offset = state_at;
                op.y = run.view(r.y);
                op.parts = parts;
                backend.gated_delta_net(stream, op);
              });
  }
  run.reference([&] {
    const GatedDeltaNetParams p = gdn_case_params(s, run.host(a_neg_w), run.host(dt_bias));
    for (const GdnRun& r : runs) {
      for (size_t i = 0; i < s.lengths.size(); ++i) {
        const int64_t first = layout.first_rows[i];
        GatedDeltaNetSequence seq;
        seq.length = s.lengths[i];
        seq.qkv = run.host(qkv) + first * ld;
        seq.ldqkv = ld;
        seq.b = run.host(b) + first * (nv + 1);
        seq.ldb = nv + 1;
        seq.a = run.host(a) + first * (nv + 1);
        seq.lda = nv + 1;
        seq.state = run.host(r.states[i]) + state_at;
        seq.y = run.host(r.y) + first * y_rows.ld;
        seq.ldy = y_rows.ld;
        gated_delta_net_reference(p, seq);
      }
    }
  });
}

}  // namespace

void add_gdn_cases(std::vector<OpCase>& cases) {
  const auto add = [&](const GdnShape& s) {
    const std::string vars = describe_parts(s.lengths) + " nk=" + std::to_string(s.nk) +
                             " nv=" + std::to_string(s.nv) + " dk=" + std::to_string(s.dk) +
                             " dv=" + std::to_string(s.dv) + (s.tiled ? " tiled" : "") +
                             (s.piece > 0 ? " pieces=" + std::to_string(s.piece) : "");
    cases.push_back({"gated_delta_net",
                     vars,
                     kFloatNmse,
                     {{OpKind::GatedDeltaNet, DType::F32, s.dk * s.dv}},
                     s.lengths.size() > 1,
                     [s](OpRun& run) { gdn_body(s, run); }});
  };
  add({{1}, 1, 1, 16, 16});
  add({{9}, 1, 2, 16, 16, false, 1});
  add({{20}, 2, 4, 16, 32, false, 3});
  add({{20}, 2, 6, 32, 16, true, 3});
  add({{7}, 1, 1, 20, 13, false, 2});
  add({{5, 1, 17}, 2, 4, 16, 16, true, 2});
  add({{5, 1, 17}, 1, 3, 24, 40, false, 4});
  add({many_parts(), 2, 2, 16, 16, false, 1});
}

}  // namespace mb::test

// SPDX-License-Identifier: MIT
// LFM2's gated short convolution (ops/short_conv.h) over the parts of a round: parts of 1, 5 and
// 17 rows whose rows are not adjacent, each part's history of B * x at an offset of its own
// state; widths that do and do not fill a work item, kernels of 1, 2, 3 (LFM2's) and 5 taps.
// Cases with pieces also run the same positions a few per round, carrying the states, and must
// give the bits of the whole round: a prefill equals its decode steps.
#include <string>

#include "common/op_cases.h"
#include "common/test_util.h"
#include "ops/short_conv.h"

namespace mb::test {
namespace {

struct ShortConvShape {
  std::vector<int64_t> lengths;
  int64_t channels;
  int kernel;
  int64_t piece = 0;  // also in rounds of this many positions per part (0: the whole round only)
};

struct ShortConvRun {
  TensorId y;
  std::vector<StateId> states;
  int64_t piece;
};

void short_conv_body(const ShortConvShape& s, OpRun& run) {
  const PartRows layout = part_rows(s.lengths);
  const int64_t C = s.channels, rows = layout.total_rows, history_at = 2, history = (s.kernel - 1) * C;
  // in_proj's rows with two spare columns: B | C | x.
  const int64_t ld = 3 * C + 2;
  const TensorId bcx = run.tensor("bcx", {0, rows, 3 * C, ld}, random_floats(rows * 3 * C, 31));
  const WeightsId weight = run.weights(random_floats(s.kernel * C, 32), 1);
  const std::vector<float> y0 = random_floats(rows * C, 33);
  const Rows y_rows{1, rows, C, C + 1};
  std::vector<ShortConvRun> runs;
  for (int64_t piece : ways_to_run(s.piece)) {
    const std::string suffix = piece > 0 ? " in pieces" : "";
    const TensorId y = run.tensor("y" + suffix, y_rows, y0);
    writes_parts(run, y, layout, Check::Nmse);
    // The history holds products of two f32 inputs, which the double reference rounds to the same
    // f32: exact.
    const auto states = part_states(
        run, "history" + suffix, layout, history_at + history + 2, {{history_at, history, Check::Exact, ""}},
        [&](size_t p) { return random_floats(history_at + history + 2, 34 + p); });
    runs.push_back({y, states, piece});
  }
  if (runs.size() == 2) {
    run.same_bits(runs[0].y, runs[1].y);
    run.same_bits(runs[0].states, runs[1].states);
  }
  for (const ShortConvRun& r : runs) {
    run_parts(run, layout, r.states, r.piece,
              [&](const Backend& backend, Stream& stream, std::span<const Part> parts) {
                backend.short_conv(
                    stream, {run.view(bcx), C, s.kernel, run.view(weight), history_at, run.view(r.y), parts});
              });
  }
  run.reference([&] {
    for (const ShortConvRun& r : runs) {
      for (size_t p = 0; p < s.lengths.size(); ++p) {
        const int64_t first = layout.first_rows[p];
        short_conv_reference({run.host(bcx) + first * ld, ld, s.lengths[p], C, s.kernel, run.host(weight),
                              run.host(r.states[p]) + history_at, run.host(r.y) + first * y_rows.ld,
                              y_rows.ld});
      }
    }
  });
}

}  // namespace

void add_short_conv_cases(std::vector<OpCase>& cases) {
  const auto add = [&](const ShortConvShape& s) {
    const std::string vars = describe_parts(s.lengths) + " channels=" + std::to_string(s.channels) +
                             " kernel=" + std::to_string(s.kernel) +
                             (s.piece > 0 ? " pieces=" + std::to_string(s.piece) : "");
    cases.push_back({"short_conv",
                     vars,
                     kFloatNmse,
                     {{OpKind::ShortConv, DType::F32, s.kernel}},
                     s.lengths.size() > 1,
                     [s](OpRun& run) { short_conv_body(s, run); }});
  };
  add({{1}, 1, 3});
  add({{3}, 16, 1, 1});
  add({{20}, 37, 2, 1});
  add({{20}, 37, 3, 2});
  add({{7}, 300, 3, 1});
  add({{5, 1, 17}, 37, 3, 2});
  add({{5, 1, 17}, 130, 5, 2});
  add({many_parts(), 37, 3, 2});
}

}  // namespace mb::test

// SPDX-License-Identifier: MIT
// RMSNorm cases (one segment over awkward widths, several segments of one row as FalconMamba
// normalizes dt_low, B and C, in place and into another buffer, with weights in one buffer or
// each in its own) and gated RMSNorm cases (groups, with and without a weight, in place).
#include <algorithm>
#include <string>

#include "common/op_cases.h"
#include "common/test_util.h"
#include "ops/gated_rms_norm.h"
#include "ops/rms_norm.h"

namespace mb::test {
namespace {

struct Segment {
  int64_t column, dim, weight_at;
};

struct RmsNormShape {
  int64_t rows, width;  // of x's rows, whose stride is one float wider
  std::vector<Segment> segments;
  bool in_place = false;
  bool shared_weight = true;  // every segment's weights are views of one buffer
  bool ones = false;          // FalconMamba's weightless norms: a vector of ones
  std::string label;
};

void rms_norm_body(const RmsNormShape& s, OpRun& run) {
  const Rows rows{2, s.rows, s.width, s.width + 1};
  int64_t weight_floats = 0;
  for (const Segment& g : s.segments) weight_floats = std::max(weight_floats, g.weight_at + g.dim);
  std::vector<float> weight_values = random_floats(weight_floats, 6);
  if (s.ones) weight_values.assign(weight_floats, 1.0f);
  const TensorId x = run.tensor("x", rows, random_floats(s.rows * s.width, 5, 3.0f));
  const TensorId y = s.in_place ? x : run.tensor("y", rows, random_floats(s.rows * s.width, 7));
  std::vector<WeightsId> weights;
  for (size_t i = 0; i < s.segments.size(); ++i) {
    if (i == 0 || !s.shared_weight)
      weights.push_back(run.weights(weight_values));
    else
      weights.push_back(weights.front());
    run.writes(y, Check::Nmse, 0, s.rows, s.segments[i].column, s.segments[i].dim,
               "segment " + std::to_string(i));
  }
  run.round([&](const Backend& backend, Stream& stream) {
    std::vector<NormSegment> segments;
    for (size_t i = 0; i < s.segments.size(); ++i)
      segments.push_back(
          {s.segments[i].column, s.segments[i].dim, run.view(weights[i]).column(s.segments[i].weight_at)});
    backend.rms_norm(stream, {run.view(x), s.rows, segments, 1e-5f, run.view(y)});
  });
  run.reference([&] {
    for (size_t i = 0; i < s.segments.size(); ++i) {
      const Segment& g = s.segments[i];
      rms_norm_reference({run.host(x) + g.column, rows.ld, s.rows, g.dim, run.host(weights[i]) + g.weight_at,
                          1e-5f, run.host(y) + g.column, rows.ld});
    }
  });
}

struct GatedShape {
  int64_t rows, dim, groups;
  bool weight, in_place;
};

void gated_body(const GatedShape& s, OpRun& run) {
  const Rows y_rows{1, s.rows, s.dim}, z_rows{0, s.rows, s.dim, s.dim + 3};
  const TensorId y = run.tensor("y", y_rows, random_floats(s.rows * s.dim, s.dim + s.groups, 2.0f));
  const TensorId z = run.tensor("z", z_rows, random_floats(s.rows * s.dim, s.dim * s.groups, 3.0f));
  const TensorId out =
      s.in_place ? y : run.tensor("out", {5, s.rows, s.dim, s.dim + 2}, random_floats(s.rows * s.dim, 8));
  run.writes(out, Check::Nmse);
  std::vector<float> weight_values = random_floats(s.dim, 7, 0.5f);
  for (float& w : weight_values) w += 1.0f;
  const WeightsId weight = run.weights(weight_values, 2);
  const int64_t group_size = s.dim / s.groups;
  run.round([&](const Backend& backend, Stream& stream) {
    backend.gated_rms_norm(stream, {run.view(y), run.view(z), s.rows, s.dim, group_size,
                                    s.weight ? run.view(weight) : View{}, 1e-5f, run.view(out)});
  });
  run.reference([&] {
    gated_rms_norm_reference({run.host(y), y_rows.cols, run.host(z), z_rows.ld, s.rows, s.dim, group_size,
                              s.weight ? run.host(weight) : nullptr, 1e-5f, run.host(out), run.rows(out).ld});
  });
}

}  // namespace

void add_norm_cases(std::vector<OpCase>& cases) {
  const auto add_norm = [&](RmsNormShape s) {
    std::string vars = "rows=" + std::to_string(s.rows) + " " + s.label;
    if (s.in_place) vars += " in_place";
    cases.push_back({"rms_norm", vars, kFloatNmse, {{OpKind::RmsNorm}}, false, [s](OpRun& run) {
                       rms_norm_body(s, run);
                     }});
  };
  // One segment over widths short of, at and past 16 lanes, a model width and odd ones.
  int index = 0;
  for (int64_t dim : {1, 7, 15, 16, 17, 64, 768, 777, 1001}) {
    for (int64_t rows : {1, 3}) {
      if (rows == 1 && index % 2 == 1) continue;
      add_norm({rows, dim, {{0, dim, 0}}, index % 3 == 1, true, false, "dim=" + std::to_string(dim)});
      ++index;
    }
  }
  // Segments of awkward widths in rows with a stride, weights at offsets of one buffer (Vulkan's
  // one dispatch) or in buffers of their own (one dispatch each).
  const std::vector<Segment> segments = {{0, 5, 0}, {5, 16, 7}, {21, 17, 0}, {40, 1, 30}};
  for (size_t count : {1, 3, 4}) {
    for (bool in_place : {false, true}) {
      for (bool shared : {true, false}) {
        if (count == 1 && !shared) continue;
        const std::vector<Segment> used(segments.begin(), segments.begin() + count);
        add_norm({3, 45, used, in_place, shared, false,
                  "segments=" + std::to_string(count) + (shared ? " one_weight_buffer" : " weight_buffers")});
      }
    }
  }
  // FalconMamba's mixer norms: dt_low (R = 48), B and C (N = 16) of x_proj's rows, in place,
  // weightless (one vector of ones), at a decode step and over a prefill.
  for (int64_t rows : {1, 9})
    add_norm({rows, 80, {{0, 48, 0}, {48, 16, 0}, {64, 16, 0}}, true, true, true, "falcon_mamba_segments"});

  for (int64_t dim : {16, 96, 100, 256}) {
    for (int64_t groups : {1, 2, 4}) {
      if (dim % groups != 0) continue;
      for (bool weight : {true, false}) {
        if (!weight && groups == 2) continue;  // the gate alone ignores the groups
        const GatedShape s{5, dim, groups, weight, dim == 100 || (dim == 256 && groups == 4)};
        const std::string vars = "rows=5 dim=" + std::to_string(dim) + " groups=" + std::to_string(groups) +
                                 (weight ? "" : " no_weight") + (s.in_place ? " in_place" : "");
        cases.push_back(
            {"gated_rms_norm", vars, kFloatNmse, {{OpKind::GatedRmsNorm}}, false, [s](OpRun& run) {
               gated_body(s, run);
             }});
      }
    }
  }
  cases.push_back({"gated_rms_norm",
                   "rows=1 dim=48 groups=3",
                   kFloatNmse,
                   {{OpKind::GatedRmsNorm}},
                   false,
                   [](OpRun& run) {
                     gated_body({1, 48, 3, true, false}, run);
                   }});
}

}  // namespace mb::test

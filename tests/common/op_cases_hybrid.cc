// SPDX-License-Identifier: MIT
// Cases of the hybrid models' ops: attention (grouped-query heads, head sizes below, at and
// between vector widths, parts at positions that cross a block of growing-state positions, many
// parts at once), rope (head sizes 8 to 128, one KV head, positions far from 0, bases 1e4 to 1e7,
// many parts), glu (SwiGLU, ReLU^2 and GeGLU, in place and not) and scale (a multiplier, and a scaled
// residual add).
#include <string>

#include "common/op_cases.h"
#include "common/test_util.h"
#include "ops/attention.h"
#include "ops/ffn.h"
#include "ops/rope.h"

namespace mb::test {
namespace {

struct AttentionShape {
  int64_t n_heads, n_kv_heads, head_dim;
  std::vector<int64_t> lengths, positions;  // each part's rows and the position of its first row
  float scale;
};

void attention_body(const AttentionShape& s, OpRun& run) {
  const AttentionParams p{s.n_heads, s.n_kv_heads, s.head_dim, s.scale};
  const PartRows layout = part_rows(s.lengths);
  const int64_t qw = p.q_width(), kvw = p.kv_width();
  const TensorId q =
      run.tensor("q", {1, layout.total_rows, qw, qw + 3}, random_floats(layout.total_rows * qw, 3));
  const TensorId y = run.tensor("y", {2, layout.total_rows, qw}, random_floats(layout.total_rows * qw, 4));
  writes_parts(run, y, layout, Check::Nmse);
  // Each part's state already holds the keys and values of every position its rows see: two
  // growing parts (keys, then values) of kvw floats a position after 3 fixed floats. The op reads
  // them and writes nothing there.
  const StateShape shape{3, {kvw, kvw}};
  std::vector<StateId> states;
  for (size_t i = 0; i < s.lengths.size(); ++i) {
    const int64_t after = s.positions[i] + s.lengths[i];
    states.push_back(run.state("kv of part " + std::to_string(i), shape, after, after,
                               random_floats(shape.host_floats(after), 10 + i, 2.0f)));
  }
  run.round([&](const Backend& backend, Stream& stream) {
    std::vector<Part> parts;
    for (size_t i = 0; i < s.lengths.size(); ++i)
      parts.push_back({run.storage(states[i]), layout.first_rows[i], s.lengths[i], s.positions[i]});
    backend.attention(stream,
                      {s.n_heads, s.n_kv_heads, s.head_dim, s.scale, run.view(q), 0, 1, run.view(y), parts});
  });
  run.reference([&] {
    for (size_t i = 0; i < s.lengths.size(); ++i) {
      const int64_t after = s.positions[i] + s.lengths[i];
      const float* keys = run.host(states[i]) + 3;
      const float* values = keys + after * kvw;
      attention_reference(p, {run.host(q) + layout.first_rows[i] * run.rows(q).ld,
                              run.rows(q).ld,
                              s.lengths[i],
                              s.positions[i],
                              {&keys, after, kvw},
                              {&values, after, kvw},
                              run.host(y) + layout.first_rows[i] * run.rows(y).ld,
                              run.rows(y).ld});
    }
  });
}

struct RopeShape {
  int64_t n_heads, n_kv_heads, head_dim;
  std::vector<int64_t> lengths, positions;  // each part's rows and the position of its first row
  double theta;
  int64_t rotary_dims = 0;  // 0: the whole head
};

void rope_body(const RopeShape& s, OpRun& run) {
  const RopeParams p{s.head_dim, s.theta, s.n_heads, s.n_kv_heads, s.rotary_dims};
  const PartRows layout = part_rows(s.lengths);
  const int64_t qw = s.n_heads * s.head_dim, kw = s.n_kv_heads * s.head_dim;
  const TensorId q =
      run.tensor("q", {1, layout.total_rows, qw, qw + 3}, random_floats(layout.total_rows * qw, 31, 2.0f));
  const TensorId k =
      run.tensor("k", {2, layout.total_rows, kw, kw + 5}, random_floats(layout.total_rows * kw, 32, 2.0f));
  writes_parts(run, q, layout, Check::Nmse);
  writes_parts(run, k, layout, Check::Nmse);
  run.round([&](const Backend& backend, Stream& stream) {
    // The op reads no state: only each part's rows and position.
    std::vector<Part> parts;
    for (size_t i = 0; i < s.lengths.size(); ++i)
      parts.push_back({nullptr, layout.first_rows[i], s.lengths[i], s.positions[i]});
    backend.rope(stream, {.head_dim = s.head_dim,
                          .theta = s.theta,
                          .q = run.view(q),
                          .n_heads = s.n_heads,
                          .k = run.view(k),
                          .n_kv_heads = s.n_kv_heads,
                          .parts = parts,
                          .rotary_dims = s.rotary_dims});
  });
  run.reference([&] {
    for (size_t i = 0; i < s.lengths.size(); ++i)
      rope_reference(p, {run.host(q) + layout.first_rows[i] * run.rows(q).ld, run.rows(q).ld,
                         run.host(k) + layout.first_rows[i] * run.rows(k).ld, run.rows(k).ld, s.lengths[i],
                         s.positions[i]});
  });
}

struct GluShape {
  Activation activation;
  int64_t rows, width;
  bool in_place;
};

void glu_body(const GluShape& s, OpRun& run) {
  const int64_t in_width = gated_activation(s.activation) ? 2 * s.width : s.width;
  const Rows x_rows{2, s.rows, in_width, in_width + 1};
  const TensorId x = run.tensor("x", x_rows, random_floats(s.rows * in_width, 5, 3.0f));
  const Rows y_rows = s.in_place ? x_rows : Rows{1, s.rows, s.width, s.width + 2};
  const TensorId y = s.in_place ? x : run.tensor("y", y_rows, random_floats(s.rows * s.width, 6));
  run.writes(y, Check::Nmse, 0, s.rows, 0, s.width);
  run.round([&](const Backend& backend, Stream& stream) {
    backend.glu(stream, {run.view(x), s.rows, s.width, s.activation, run.view(y)});
  });
  run.reference([&] {
    glu_reference({run.host(x), x_rows.ld, s.rows, s.width, s.activation, run.host(y), run.rows(y).ld});
  });
}

struct ScaleShape {
  int64_t rows, cols;
  float scale;
  bool accumulate, in_place;
};

void scale_body(const ScaleShape& s, OpRun& run) {
  const Rows rows{1, s.rows, s.cols, s.cols + 1};
  const TensorId x = run.tensor("x", rows, random_floats(s.rows * s.cols, 7));
  const TensorId y = s.in_place ? x : run.tensor("y", {3, s.rows, s.cols}, random_floats(s.rows * s.cols, 8));
  run.writes(y, Check::Nmse);
  run.round([&](const Backend& backend, Stream& stream) {
    backend.scale(stream, {run.view(x), s.rows, s.cols, s.scale, s.accumulate, run.view(y)});
  });
  run.reference([&] {
    scale_rows_reference(
        {run.host(x), rows.ld, s.rows, s.cols, s.scale, s.accumulate, run.host(y), run.rows(y).ld});
  });
}

}  // namespace

void add_hybrid_cases(std::vector<OpCase>& cases) {
  // Head sizes of one partial vector (8, 12, 24), whole vectors (64, 128) and 80 (partial again);
  // one KV head for all, a KV head per query head, groups; parts from position 0, a part across a
  // block of growing positions (250 + 17 > 256), and more parts than one dispatch takes.
  const std::vector<AttentionShape> attention = {
      {2, 1, 8, {1}, {0}, 0.35f},
      {4, 2, 12, {5, 1, 17}, {0, 40, 3}, 0.0625f},
      {4, 4, 64, {3, 2}, {250, 0}, 0.125f},
      {6, 2, 80, {17}, {250}, 0.11f},
      {1, 1, 128, {1, 1}, {300, 7}, 0.088f},
      {8, 1, 24, many_parts(), std::vector<int64_t>(many_parts().size(), 9), 0.2f}};
  for (const AttentionShape& s : attention) {
    const std::string vars = "heads=" + std::to_string(s.n_heads) + "/" + std::to_string(s.n_kv_heads) +
                             " head_dim=" + std::to_string(s.head_dim) + " " + describe_parts(s.lengths) +
                             " positions=" + (s.lengths.size() > 4 ? "9" : join(s.positions));
    cases.push_back({"attention",
                     vars,
                     kFloatNmse,
                     {{OpKind::Attention, DType::F32, s.head_dim}},
                     s.lengths.size() > 1,
                     [s](OpRun& run) { attention_body(s, run); }});
  }
  // Half a head of one partial vector (8), whole vectors (64, 128) and 80 (two and a half); one KV
  // head; positions from 0, far from it (1e5; across 2^20, where an f32 position would no longer
  // be exact past 2^24 and an f32 angle loses most of its bits) and of many parts at once; the
  // bases of Llama (1e4) and of the Granite-4.0 models (1e7).
  std::vector<RopeShape> rope = {
      {2, 1, 8, {1}, {0}, 1e4},
      {4, 1, 64, {5, 1, 17}, {0, 100000, 3}, 1e4},
      {6, 2, 80, {17}, {1048560}, 1e7},
      {2, 2, 128, {3, 2}, {250, 65535}, 1e7},
      {8, 1, 8, many_parts(), std::vector<int64_t>(many_parts().size(), 9), 1e6, 0}};
  // Partial rotary (Bamba's half head, transformers' partial_rotary_factor): the first rot
  // channels of each head rotated, pairs (i, i + rot / 2); rot 2 (one pair), 8 of 16 (a partial
  // vector), 64 of 128 (Bamba-9B), 40 of 80, and rot = head_dim given explicitly.
  for (const RopeShape& s : std::vector<RopeShape>{{2, 1, 4, {3}, {5}, 1e4, 2},
                                                   {4, 2, 16, {5, 1, 17}, {0, 100000, 3}, 1e4, 8},
                                                   {4, 1, 128, {9, 2}, {0, 1048560}, 1e4, 64},
                                                   {3, 3, 80, {17}, {250}, 1e7, 40},
                                                   {2, 1, 32, {4}, {7}, 1e4, 32}})
    rope.push_back(s);
  for (const RopeShape& s : rope) {
    const std::string vars = "heads=" + std::to_string(s.n_heads) + "/" + std::to_string(s.n_kv_heads) +
                             " head_dim=" + std::to_string(s.head_dim) + " " + describe_parts(s.lengths) +
                             " positions=" + (s.lengths.size() > 4 ? "9" : join(s.positions)) +
                             " theta=" + std::to_string(static_cast<int64_t>(s.theta)) +
                             (s.rotary_dims > 0 ? " rot=" + std::to_string(s.rotary_dims) : "");
    cases.push_back({"rope", vars, kFloatNmse, {{OpKind::Rope}}, s.lengths.size() > 1, [s](OpRun& run) {
                       rope_body(s, run);
                     }});
  }
  for (Activation activation :
       {Activation::SwiGlu, Activation::ReluSquared, Activation::GeluErf, Activation::SigmoidGlu})
    for (const auto& [rows, width, in_place] : std::vector<std::tuple<int64_t, int64_t, bool>>{
             {1, 1, false}, {3, 17, true}, {9, 64, false}, {2, 100, true}})
      cases.push_back({"glu",
                       std::string(activation_name(activation)) + " rows=" + std::to_string(rows) +
                           " width=" + std::to_string(width) + (in_place ? " in_place" : ""),
                       kFloatNmse,
                       {{OpKind::Glu}},
                       false,
                       [g = GluShape{activation, rows, width, in_place}](OpRun& run) { glu_body(g, run); }});
  for (const ScaleShape& s : std::vector<ScaleShape>{{1, 1, 12.0f, false, true},
                                                     {5, 37, 0.22f, true, false},
                                                     {9, 64, 1.0f / 3.0f, false, false},
                                                     {2, 100, -0.5f, true, false}})
    cases.push_back({"scale",
                     "rows=" + std::to_string(s.rows) + " cols=" + std::to_string(s.cols) +
                         " scale=" + std::to_string(s.scale) + (s.accumulate ? " accumulate" : "") +
                         (s.in_place ? " in_place" : ""),
                     kFloatNmse,
                     {{OpKind::Scale}},
                     false,
                     [s](OpRun& run) { scale_body(s, run); }});
}

}  // namespace mb::test

// SPDX-License-Identifier: MIT
// Mamba-2 and Mamba-3 scan cases: both evaluation orders (sequential, and the chunked SSD form
// with chunks of 5, 16 and 64 positions, so parts end inside a chunk) over parts of 1, 37 and 100
// positions from random nonzero carried states, over awkward shapes (d_state 1 to 128, headdim
// 8 to 64, 1 to 8 groups, head counts that are not multiples of 8, per-channel D, dt limits,
// Mamba-3 with and without RoPE angles and the gate norm). Sequential cases with pieces also run
// the positions one per round and must give the bits of the whole round.
#include <algorithm>
#include <cmath>
#include <string>

#include "common/op_cases.h"
#include "common/test_util.h"
#include "ops/mamba2_scan.h"
#include "ops/mamba3_scan.h"

namespace mb::test {
namespace {

const char* form_name(ScanForm form) {
  switch (form) {
    case ScanForm::Auto:
      return "auto";
    case ScanForm::Sequential:
      return "sequential";
    case ScanForm::Chunked:
      return "chunked";
  }
  return "?";
}

struct Mamba2Shape {
  int64_t heads, headdim, d_state, groups;
  bool d_per_channel = false;
  float dt_min = 0.0f, dt_max = INFINITY;
};

struct Mamba2Case {
  Mamba2Shape shape;
  std::vector<int64_t> lengths;
  ScanForm form;
  int64_t chunk;
  int64_t piece = 0;
};

// A case's parameters (pointers set in the reference run) and weights, from fixed seeds.
struct Mamba2Weights {
  Mamba2ScanParams params;
  std::vector<float> dt_bias;
  WeightsId dt_bias_w, a_w, a_base2_w, d_w;
};

Mamba2Weights mamba2_weights(const Mamba2Case& c, OpRun& run) {
  const Mamba2Shape& s = c.shape;
  Mamba2Weights w;
  Mamba2ScanParams& p = w.params;
  p.n_heads = s.heads;
  p.headdim = s.headdim;
  p.d_state = s.d_state;
  p.n_groups = s.groups;
  p.d_skip_per_channel = s.d_per_channel;
  p.dt_min = s.dt_min;
  p.dt_max = s.dt_max;
  p.chunk = c.chunk;
  const int64_t H = s.heads;
  w.dt_bias = random_floats(H, 1, 1.0f);
  for (float& b : w.dt_bias) b -= 3.0f;  // dt around softplus(-3) = 0.05
  std::vector<float> a(H), a_base2(H);
  const std::vector<float> a_log = random_floats(H, 2, 1.4f);
  for (int64_t h = 0; h < H; ++h) {
    const double A = -std::exp(1.4 + double(a_log[h]));  // A in about [-16, -1]
    a[h] = static_cast<float>(A);
    a_base2[h] = static_cast<float>(A * M_LOG2E);
  }
  w.dt_bias_w = run.weights(w.dt_bias, 1);
  w.a_w = run.weights(a, 2);
  w.a_base2_w = run.weights(a_base2);
  w.d_w = run.weights(random_floats(s.d_per_channel ? H * s.headdim : H, 3, 1.0f), 3);
  return w;
}

// The outputs and states of one way of running a case's positions (ways_to_run).
struct Mamba2Way {
  TensorId dt, y;
  std::vector<StateId> states;
  int64_t piece;
};

void mamba2_body(const Mamba2Case& c, OpRun& run) {
  const PartRows layout = part_rows(c.lengths);
  Mamba2Weights w = mamba2_weights(c, run);
  const int64_t H = c.shape.heads, di = w.params.d_inner(), rows = layout.total_rows;
  const int64_t width = w.params.conv_width(), state_floats = H * c.shape.d_state * c.shape.headdim;
  const int64_t state_at = 4;
  const TensorId xbc = run.tensor("xbc", {1, rows, width, width + 2}, random_floats(rows * width, 4, 1.0f));
  std::vector<Mamba2Way> ways;
  for (int64_t piece : ways_to_run(c.piece)) {
    const std::string suffix = piece > 0 ? " in pieces" : "";
    // Raw dt, which the op replaces by the clamped softplus: an output too.
    const TensorId dt = run.tensor("dt" + suffix, {0, rows, H, H + 1}, random_floats(rows * H, 5, 2.0f));
    const TensorId y = run.tensor("y" + suffix, {2, rows, di, di}, random_floats(rows * di, 7));
    writes_parts(run, dt, layout, Check::Nmse);
    writes_parts(run, y, layout, Check::Nmse);
    // A carried state of the size decode steps leave.
    const auto states = part_states(run, "ssm state" + suffix, layout, state_at + state_floats + 1,
                                    {{state_at, state_floats, Check::Nmse, ""}}, [&](size_t part) {
                                      return random_floats(state_at + state_floats + 1, 6 + part, 0.3f);
                                    });
    ways.push_back({dt, y, states, piece});
  }
  if (ways.size() > 1) {
    run.same_bits(ways[0].y, ways[1].y);
    run.same_bits(ways[0].dt, ways[1].dt);
    run.same_bits(ways[0].states, ways[1].states);
  }
  for (const Mamba2Way& way : ways) {
    run_parts(run, layout, way.states, way.piece,
              [&](const Backend& backend, Stream& stream, std::span<const Part> parts) {
                const Mamba2ScanParams& p = w.params;
                backend.mamba2_scan(
                    stream, {p.n_heads, p.headdim, p.d_state, p.n_groups, run.view(w.dt_bias_w),
                             run.view(w.a_base2_w), run.view(w.a_w), run.view(w.d_w), p.d_skip_per_channel,
                             p.dt_min, p.dt_max, c.form, c.chunk, run.view(xbc), run.view(way.dt),
                             run.view(way.y), state_at, parts});
              });
  }
  run.reference([&] {
    Mamba2ScanParams& p = w.params;
    p.dt_bias = run.host(w.dt_bias_w);
    p.a = run.host(w.a_w);
    p.a_base2 = run.host(w.a_base2_w);
    p.d_skip = run.host(w.d_w);
    for (const Mamba2Way& way : ways) {
      const int64_t lddt = run.rows(way.dt).ld;
      for (size_t i = 0; i < c.lengths.size(); ++i) {
        const int64_t first = layout.first_rows[i];
        float* dt = run.host(way.dt) + first * lddt;
        mamba2_scan_reference(p, {c.lengths[i], run.host(xbc) + first * (width + 2), width + 2, dt, lddt,
                                  run.host(way.states[i]) + state_at, run.host(way.y) + first * di, di,
                                  c.form == ScanForm::Chunked});
        // The op leaves the clamped softplus(dt + dt_bias) in dt.
        for (int64_t t = 0; t < c.lengths[i]; ++t) {
          for (int64_t h = 0; h < H; ++h) {
            const double x = double(dt[t * lddt + h]) + w.dt_bias[h];
            const double softplus = x > 20.0 ? x : std::log1p(std::exp(x));
            dt[t * lddt + h] =
                static_cast<float>(std::min(std::max(softplus, double(p.dt_min)), double(p.dt_max)));
          }
        }
      }
    }
  });
}

struct Mamba3Shape {
  int64_t heads, headdim, d_state, groups, angles;
  bool gate_norm;
};

struct Mamba3Case {
  Mamba3Shape shape;
  std::vector<int64_t> lengths;
  ScanForm form;
  int64_t chunk;
  int64_t piece = 0;
};

struct Mamba3Weights {
  Mamba3ScanParams params;
  WeightsId dt_bias, b_bias, c_bias, b_norm, c_norm, d_skip, gate_norm;
};

Mamba3Weights mamba3_weights(const Mamba3Case& c, OpRun& run) {
  const Mamba3Shape& s = c.shape;
  Mamba3Weights w;
  Mamba3ScanParams& p = w.params;
  p.n_heads = s.heads;
  p.headdim = s.headdim;
  p.d_state = s.d_state;
  p.n_groups = s.groups;
  p.n_angles = s.angles;
  p.chunk = c.chunk;
  const int64_t H = s.heads, N = s.d_state;
  std::vector<float> dt_bias = random_floats(H, 1, 1.0f), b_norm = random_floats(N, 4, 0.5f),
                     c_norm = random_floats(N, 5, 0.5f), gate = random_floats(p.d_inner(), 7, 0.5f);
  for (float& b : dt_bias) b -= 3.0f;  // dt around softplus(-3) = 0.05
  for (std::vector<float>* weights : {&b_norm, &c_norm, &gate})
    for (float& v : *weights) v += 1.0f;
  w.dt_bias = run.weights(dt_bias, 1);
  w.b_bias = run.weights(random_floats(H * N, 2, 0.3f));
  w.c_bias = run.weights(random_floats(H * N, 3, 0.3f), 2);
  w.b_norm = run.weights(b_norm);
  w.c_norm = run.weights(c_norm, 1);
  w.d_skip = run.weights(random_floats(H, 6, 1.0f));
  w.gate_norm = run.weights(gate, 3);
  return w;
}

// A carried state of the size decode steps leave, at `at` of the part's state: k and v of O(1);
// SSM elements of about 0.1 (sums of ~20 outer products weighted by gamma ~ 0.025); angles in
// [0, 2 pi).
std::vector<float> mamba3_state(const Mamba3StateLayout& layout, int64_t at, int64_t floats, uint64_t seed) {
  std::vector<float> v = random_floats(floats, seed, 1.0f);
  for (int64_t i = layout.ssm; i < layout.k; ++i) v[at + i] *= 0.1f;
  for (int64_t i = layout.angle; i < layout.total; ++i) v[at + i] = 3.14159f * (v[at + i] + 1.0f);
  return v;
}

struct Mamba3Way {
  TensorId proj, y;
  std::vector<StateId> states;
  int64_t piece;
};

void mamba3_body(const Mamba3Case& c, OpRun& run) {
  const Mamba3Shape& s = c.shape;
  const PartRows layout = part_rows(c.lengths);
  Mamba3Weights w = mamba3_weights(c, run);
  const int64_t H = s.heads, N = s.d_state, rows = layout.total_rows;
  const int64_t width = w.params.proj_width(), di = w.params.d_inner();
  const Mamba3StateLayout state = mamba3_state_layout(w.params);
  const int64_t state_at = 2, state_floats = state_at + state.total + 1;
  std::vector<Mamba3Way> ways;
  for (int64_t piece : ways_to_run(c.piece)) {
    const std::string suffix = piece > 0 ? " in pieces" : "";
    const TensorId proj =
        run.tensor("proj" + suffix, {1, rows, width, width + 1}, random_floats(rows * width, 8, 1.5f));
    const TensorId y = run.tensor("y" + suffix, {0, rows, di, di + 2}, random_floats(rows * di, 9));
    writes_parts(run, y, layout, Check::Nmse);
    // The op replaces B and C by their BCNorm outputs and the angles by their velocities, which
    // the references do not compute.
    const int64_t b_at = 2 * di, angles_at = b_at + 2 * s.groups * N + 3 * H;
    for (size_t i = 0; i < c.lengths.size(); ++i) {
      run.writes(proj, Check::Bits, layout.first_rows[i], c.lengths[i], b_at, 2 * s.groups * N, "B|C");
      if (s.angles > 0)
        run.writes(proj, Check::Bits, layout.first_rows[i], c.lengths[i], angles_at, s.angles, "angles");
    }
    const auto states =
        part_states(run, "state" + suffix, layout, state_floats,
                    {{state_at + state.ssm, state.k - state.ssm, Check::Nmse, "ssm"},
                     {state_at + state.k, state.v - state.k, Check::Nmse, "k"},
                     {state_at + state.v, state.angle - state.v, Check::Exact, "v"},
                     {state_at + state.angle, state.total - state.angle, Check::Angles, "angles"}},
                    [&](size_t part) { return mamba3_state(state, state_at, state_floats, 10 + part); });
    ways.push_back({proj, y, states, piece});
  }
  if (ways.size() > 1) {
    run.same_bits(ways[0].y, ways[1].y);
    run.same_bits(ways[0].proj, ways[1].proj);
    run.same_bits(ways[0].states, ways[1].states);
  }
  for (const Mamba3Way& way : ways) {
    run_parts(run, layout, way.states, way.piece,
              [&](const Backend& backend, Stream& stream, std::span<const Part> parts) {
                Mamba3ScanOp op;
                op.n_heads = H;
                op.headdim = s.headdim;
                op.d_state = N;
                op.n_groups = s.groups;
                op.n_angles = s.angles;
                op.dt_bias = run.view(w.dt_bias);
                op.b_bias = run.view(w.b_bias);
                op.c_bias = run.view(w.c_bias);
                op.b_norm = run.view(w.b_norm);
                op.c_norm = run.view(w.c_norm);
                op.d_skip = run.view(w.d_skip);
                op.gate_norm = s.gate_norm ? run.view(w.gate_norm) : View{};
                op.form = c.form;
                op.chunk = c.chunk;
                op.proj = run.view(way.proj);
                op.y = run.view(way.y);
                op.state_offset = state_at;
                op.parts = parts;
                backend.mamba3_scan(stream, op);
              });
  }
  run.reference([&] {
    Mamba3ScanParams& p = w.params;
    p.dt_bias = run.host(w.dt_bias);
    p.b_bias = run.host(w.b_bias);
    p.c_bias = run.host(w.c_bias);
    p.b_norm = run.host(w.b_norm);
    p.c_norm = run.host(w.c_norm);
    p.d_skip = run.host(w.d_skip);
    p.gate_norm = s.gate_norm ? run.host(w.gate_norm) : nullptr;
    for (const Mamba3Way& way : ways) {
      for (size_t i = 0; i < c.lengths.size(); ++i) {
        const int64_t first = layout.first_rows[i];
        mamba3_scan_reference(p, {c.lengths[i], run.host(way.proj) + first * (width + 1), width + 1,
                                  run.host(way.states[i]) + state_at, run.host(way.y) + first * (di + 2),
                                  di + 2, c.form == ScanForm::Chunked});
      }
    }
  });
}

std::string describe(const std::vector<int64_t>& lengths, ScanForm form, int64_t chunk, int64_t piece) {
  std::string text = describe_parts(lengths) + " " + form_name(form);
  if (form != ScanForm::Sequential) text += " chunk=" + std::to_string(chunk);
  if (piece > 0) text += " pieces=" + std::to_string(piece);
  return text;
}

}  // namespace

void add_ssd_scan_cases(std::vector<OpCase>& cases) {
  const std::vector<int64_t> lengths = {37, 1, 100};
  const std::vector<std::pair<std::string, Mamba2Shape>> mamba2 = {
      {"n=128 p=64 heads=2 groups=1", {2, 64, 128, 1}},
      {"n=64 p=16 heads=8 groups=8", {8, 16, 64, 8}},
      {"n=16 p=24 heads=6 groups=2", {6, 24, 16, 2}},
      {"n=1 p=16 heads=3 groups=1", {3, 16, 1, 1}},
      {"n=20 p=40 heads=4 groups=2 d_per_channel dt_max=0.03", {4, 40, 20, 2, true, 0.0f, 0.03f}},
      {"n=16 p=16 heads=2 groups=1 dt_min=0.01 dt_max=0.02", {2, 16, 16, 1, false, 0.01f, 0.02f}}};
  const auto add_mamba2 = [&](const std::string& label, const Mamba2Case& c) {
    cases.push_back({"mamba2_scan",
                     label + " " + describe(c.lengths, c.form, c.chunk, c.piece),
                     kFloatNmse,
                     {{OpKind::Mamba2Scan, DType::F32, c.shape.d_state}},
                     c.lengths.size() > 1,
                     [c](OpRun& run) { mamba2_body(c, run); }});
  };
  for (const auto& [label, shape] : mamba2) {
    add_mamba2(label, {shape, lengths, ScanForm::Sequential, 64});
    for (int64_t chunk : {5, 16, 64}) add_mamba2(label, {shape, lengths, ScanForm::Chunked, chunk});
  }
  add_mamba2(mamba2[1].first, {mamba2[1].second, {23, 1, 2}, ScanForm::Sequential, 64, 1});
  add_mamba2(mamba2[4].first, {mamba2[4].second, {9, 4}, ScanForm::Sequential, 64, 1});
  add_mamba2(mamba2[2].first, {mamba2[2].second, many_parts(), ScanForm::Auto, 16});

  const std::vector<std::pair<std::string, Mamba3Shape>> mamba3 = {
      {"n=128 p=64 heads=2 groups=1 angles=32", {2, 64, 128, 1, 32, false}},
      {"n=10 p=8 heads=4 groups=2 angles=5 gate_norm", {4, 8, 10, 2, 5, true}},
      {"n=16 p=24 heads=3 groups=3 angles=0 gate_norm", {3, 24, 16, 3, 0, true}}};
  const auto add_mamba3 = [&](const std::string& label, const Mamba3Case& c) {
    cases.push_back({"mamba3_scan",
                     label + " " + describe(c.lengths, c.form, c.chunk, c.piece),
                     kFloatNmse,
                     {{OpKind::Mamba3Scan, DType::F32, c.shape.d_state}},
                     c.lengths.size() > 1,
                     [c](OpRun& run) { mamba3_body(c, run); }});
  };
  for (const auto& [label, shape] : mamba3) {
    add_mamba3(label, {shape, lengths, ScanForm::Sequential, 64});
    for (int64_t chunk : {5, 16, 64}) add_mamba3(label, {shape, lengths, ScanForm::Chunked, chunk});
  }
  // Auto: the CPU takes the chunked form for the parts of 37 and 100 positions, the sequential
  // one for the single position.
  add_mamba3(mamba3[1].first, {mamba3[1].second, lengths, ScanForm::Auto, 16});
  add_mamba3(mamba3[2].first, {mamba3[2].second, {23, 1, 2}, ScanForm::Sequential, 64, 1});
  add_mamba3(mamba3[0].first, {mamba3[0].second, many_parts(), ScanForm::Sequential, 64});
}

}  // namespace mb::test

// SPDX-License-Identifier: MIT
// Causal conv and selective scan cases over the parts of a round: parts of 1, 5 and 17 rows whose
// rows are not adjacent, more parts than one Vulkan dispatch takes (kMaxGpuParts = 16), each
// part's state at an offset of its own state; d_state 1 to 128, with and without the z gate, and
// the dt_proj fusion in decode-sized (< 9 rows) and prefill-sized rounds. Cases with pieces also
// run the same positions a few per round, carrying the states, and must give the bits of the
// whole round: a prefill equals its decode steps.
#include <string>

#include "common/op_cases.h"
#include "common/test_util.h"
#include "ops/causal_conv.h"
#include "ops/matmul.h"
#include "ops/selective_scan.h"

namespace mb::test {
namespace {

struct ConvShape {
  std::vector<int64_t> lengths;
  int64_t channels;
  int kernel;
  bool bias;
  int64_t piece = 0;  // also in rounds of this many positions per part (0: the whole round only)
};

// The outputs and states of one way of running a case's positions (ways_to_run).
struct PartsRun {
  TensorId y;
  std::vector<StateId> states;
  int64_t piece;
};

void same_bits(OpRun& run, const std::vector<PartsRun>& runs) {
  if (runs.size() < 2) return;
  run.same_bits(runs[0].y, runs[1].y);
  run.same_bits(runs[0].states, runs[1].states);
}

void conv_body(const ConvShape& s, OpRun& run) {
  const PartRows layout = part_rows(s.lengths);
  const int64_t C = s.channels, rows = layout.total_rows, history_at = 3, history = (s.kernel - 1) * C;
  // x is the x half of Mamba-1's xz rows.
  const TensorId x = run.tensor("x", {0, rows, C, 2 * C}, random_floats(rows * C, 7));
  const WeightsId weight = run.weights(random_floats(s.kernel * C, 8), 1);
  const WeightsId bias = run.weights(random_floats(C, 9), 2);
  const std::vector<float> y0 = random_floats(rows * C, 10);
  const Rows y_rows{1, rows, C, C + 1};
  std::vector<PartsRun> runs;
  for (int64_t piece : ways_to_run(s.piece)) {
    const std::string suffix = piece > 0 ? " in pieces" : "";
    const TensorId y = run.tensor("y" + suffix, y_rows, y0);
    writes_parts(run, y, layout, Check::Nmse);
    // The history holds copies of inputs: exact.
    const auto states = part_states(
        run, "history" + suffix, layout, history_at + history + 2, {{history_at, history, Check::Exact, ""}},
        [&](size_t p) { return random_floats(history_at + history + 2, 11 + p); });
    runs.push_back({y, states, piece});
  }
  same_bits(run, runs);
  for (const PartsRun& r : runs) {
    run_parts(run, layout, r.states, r.piece,
              [&](const Backend& backend, Stream& stream, std::span<const Part> parts) {
                backend.causal_conv(
                    stream, {run.view(x), C, s.kernel, run.view(weight), s.bias ? run.view(bias) : View{},
                             history_at, run.view(r.y), parts});
              });
  }
  run.reference([&] {
    for (const PartsRun& r : runs) {
      for (size_t p = 0; p < s.lengths.size(); ++p) {
        const int64_t first = layout.first_rows[p];
        causal_conv_silu_reference({run.host(x) + first * 2 * C, 2 * C, s.lengths[p], C, s.kernel,
                                    run.host(weight), s.bias ? run.host(bias) : nullptr,
                                    run.host(r.states[p]) + history_at, run.host(r.y) + first * y_rows.ld,
                                    y_rows.ld});
      }
    }
  });
}

struct ScanShape {
  std::vector<int64_t> lengths;
  int64_t channels, d_state;
  bool gate = true;
  int64_t piece = 0;
  float dt_scale = 0.5f;
  // dt = softplus(dt_low W^T + bias) inside the op (ScanDtProj), W [channels, rank] in `dtype`.
  bool dt_proj = false;
  DType dtype = DType::F32;
  int64_t rank = 0;
  bool dt_low_apart = false;  // dt_low in a buffer of its own rather than the columns before B
};

void scan_body(const ScanShape& s, OpRun& run) {
  const PartRows layout = part_rows(s.lengths);
  const int64_t D = s.channels, N = s.d_state, R = s.dt_proj && !s.dt_low_apart ? s.rank : 0;
  const int64_t rows = layout.total_rows;
  const TensorId u = run.tensor("u", {1, rows, D, D + 2}, random_floats(rows * D, 11));
  std::vector<float> dt_values = random_floats(rows * D, 12, s.dt_scale);
  for (float& v : dt_values) v = std::fabs(v) + 1e-3f;
  const TensorId dt = run.tensor("dt", {0, rows, D}, dt_values);
  // x_proj's output rows: dt_low (with the fused dt_proj), B, C and three floats of padding.
  const Rows bc_rows{2, rows, R + 2 * N, R + 2 * N + 3};
  const TensorId bc = run.tensor("dt_low|B|C", bc_rows, random_floats(rows * (R + 2 * N), 13));
  const TensorId z = run.tensor("z", {0, rows, D, 2 * D}, random_floats(rows * D, 14, 2.0f));
  const TensorId dt_low =
      s.dt_low_apart ? run.tensor("dt_low", {0, rows, s.rank, s.rank + 1}, random_floats(rows * s.rank, 15))
                     : bc;
  std::vector<float> a_base2(N * D);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t c = 0; c < D; ++c) a_base2[n * D + c] = -float(n + 1) * (1.0f + 0.01f * c);
  const WeightsId a = run.weights(a_base2, 3);
  const WeightsId d_skip = run.weights(random_floats(D, 16), 1);
  const MatrixId w = run.matrix(s.dtype, D, std::max<int64_t>(s.rank, 1),
                                random_floats(D * std::max<int64_t>(s.rank, 1), 17, 0.5f));
  const WeightsId dt_bias = run.weights(random_floats(D, 18), 2);
  // With dt_proj, the CPU writes dt first; a backend that fuses it never does.
  if (s.dt_proj) run.writes(dt, Check::Scratch);
  const std::vector<float> y0 = random_floats(rows * D, 19);
  std::vector<PartsRun> runs;
  for (int64_t piece : ways_to_run(s.piece)) {
    const std::string suffix = piece > 0 ? " in pieces" : "";
    const TensorId y = run.tensor("y" + suffix, {3, rows, D, D + 1}, y0);
    writes_parts(run, y, layout, Check::Nmse);
    const auto states =
        part_states(run, "ssm state" + suffix, layout, 5 + N * D + 2, {{5, N * D, Check::Nmse, ""}},
                    [&](size_t p) { return random_floats(5 + N * D + 2, 20 + p); });
    runs.push_back({y, states, piece});
  }
  same_bits(run, runs);
  for (const PartsRun& r : runs) {
    run_parts(run, layout, r.states, r.piece,
              [&](const Backend& backend, Stream& stream, std::span<const Part> parts) {
                SelectiveScanOp op;
                op.channels = D;
                op.d_state = N;
                op.u = run.view(u);
                op.dt = run.view(dt);
                op.b = run.view(bc).column(R);
                op.c = run.view(bc).column(R + N);
                op.z = s.gate ? run.view(z) : View{};
                op.a_base2 = run.view(a);
                op.d_skip = run.view(d_skip);
                op.state_offset = 5;
                op.y = run.view(r.y);
                op.parts = parts;
                // dt_proj runs over every row of the buffers, the gaps between parts included.
                const ScanDtProj proj{run.matrix(w), run.view(dt_bias), run.view(dt_low), rows};
                if (s.dt_proj) op.dt_proj = &proj;
                backend.selective_scan(stream, op);
              });
  }
  run.reference([&] {
    std::vector<float> dts(rows * D);
    float* dt_rows = run.host(dt);
    int64_t lddt = D;
    if (s.dt_proj) {
      matmul_reference({run.host(dt_low), run.rows(dt_low).ld, rows, run.host(w), run.host(dt_bias),
                        dts.data(), D, false, true});
      dt_rows = dts.data();
    }
    for (const PartsRun& r : runs) {
      for (size_t p = 0; p < s.lengths.size(); ++p) {
        const int64_t first = layout.first_rows[p];
        const float* b = run.host(bc) + first * bc_rows.ld + R;
        selective_scan_reference(
            {s.lengths[p], D, N, run.host(u) + first * (D + 2), D + 2, dt_rows + first * lddt, lddt, b, b + N,
             bc_rows.ld, s.gate ? run.host(z) + first * 2 * D : nullptr, 2 * D, run.host(a), run.host(d_skip),
             run.host(r.states[p]) + 5, run.host(r.y) + first * (D + 1), D + 1});
      }
    }
  });
}

}  // namespace

void add_conv_scan_cases(std::vector<OpCase>& cases) {
  const auto add_conv = [&](const ConvShape& s) {
    const std::string vars = describe_parts(s.lengths) + " channels=" + std::to_string(s.channels) +
                             " kernel=" + std::to_string(s.kernel) + (s.bias ? " bias" : "") +
                             (s.piece > 0 ? " pieces=" + std::to_string(s.piece) : "");
    cases.push_back({"causal_conv",
                     vars,
                     kFloatNmse,
                     {{OpKind::CausalConv, DType::F32, s.kernel}},
                     s.lengths.size() > 1,
                     [s](OpRun& run) { conv_body(s, run); }});
  };
  // One sequence: every width and kernel size (bias except at K = 2), lengths of 1, 3 and 20,
  // in pieces of 1 and 2 positions.
  int index = 0;
  for (int64_t channels : {1, 16, 37}) {
    for (int kernel : {1, 2, 4, 7}) {
      const int64_t length = std::vector<int64_t>{1, 3, 20}[index % 3];
      add_conv({{length}, channels, kernel, kernel != 2, length > 1 ? 1 + index % 2 : 0});
      ++index;
    }
  }
  add_conv({{3, 20}, 16, 16, true, 4});
  // Several sequences per round, in one dispatch and (past kMaxGpuParts) in several.
  for (const std::vector<int64_t>& lengths : {std::vector<int64_t>{1}, {5, 1, 17}})
    for (int64_t channels : {1, 37, 130})
      for (int kernel : {1, 4})
        if (lengths.size() > 1 || channels > 1 || kernel > 1)  // the sweep above has 1 channel, K = 1
          add_conv({lengths, channels, kernel, channels != 37, lengths.size() > 1 ? 2 : 0});
  add_conv({many_parts(), 37, 4, true, 2});

  const auto add_scan = [&](const ScanShape& s) {
    std::string vars = describe_parts(s.lengths) + " channels=" + std::to_string(s.channels) +
                       " d_state=" + std::to_string(s.d_state) + (s.gate ? " gate" : "");
    if (s.dt_proj) vars += " dt_proj=" + std::string(dtype_name(s.dtype)) + " rank=" + std::to_string(s.rank);
    if (s.dt_low_apart) vars += " dt_low_apart";
    if (s.piece > 0) vars += " pieces=" + std::to_string(s.piece);
    if (s.dt_scale != 0.5f) vars += " dt_scale=" + std::to_string(static_cast<int>(s.dt_scale));
    std::vector<OpQuery> queries = {{OpKind::SelectiveScan, DType::F32, s.d_state}};
    if (s.dt_proj) queries.push_back({OpKind::Matmul, s.dtype});
    cases.push_back({"selective_scan", vars, kFloatNmse, queries, s.lengths.size() > 1,
                     [s](OpRun& run) { scan_body(s, run); }});
  };
  // One sequence of 9 positions over state sizes and widths, whole and in pieces of 1 and 4.
  index = 0;
  for (int64_t d_state : {1, 16, 64, 128}) {
    for (int64_t channels : {1, 17, 48}) {
      add_scan({{9}, channels, d_state, channels != 1, std::vector<int64_t>{0, 1, 4}[index % 3]});
      ++index;
    }
  }
  // Steps up to dt = 40 drive dt * A down to -900 (in base 2), through the range where exp
  // underflows to subnormals; the kernels flush decays below 2^-64 to 0.
  add_scan({{12}, 40, 16, true, 0, 40.0f});
  for (const std::vector<int64_t>& lengths : {std::vector<int64_t>{1}, {5, 1, 17}})
    for (int64_t d_state : {1, 16, 64})
      for (int64_t channels : {1, 37})
        add_scan({lengths, channels, d_state, channels != 1, lengths.size() > 1 ? 2 : 0});
  add_scan({many_parts(), 37, 16, true, 2});
  // dt_proj inside the scan: 70 channels span two weight panels; decode-sized rounds (parts
  // 1,1,2: 7 rows) are where Vulkan fuses it, prefill-sized ones (1,5,17: 26 rows) where it runs
  // a GEMM first, and so does a decode round whose dt_low lies apart from B. Each rank meets
  // both round sizes.
  index = 0;
  for (DType dtype : {DType::F32, DType::BF16, DType::F16}) {
    for (int64_t rank : {1, 3, 16, 48}) {
      ScanShape s{(index + index / 4) % 2 ? std::vector<int64_t>{1, 5, 17} : std::vector<int64_t>{1, 1, 2},
                  rank == 16 ? 70 : 37, index % 3 == 0 ? 1 : 16};
      s.dt_proj = true;
      s.dtype = dtype;
      s.rank = rank;
      add_scan(s);
      ++index;
    }
  }
  for (const std::vector<int64_t>& lengths : {std::vector<int64_t>{1, 1, 2}, {1}}) {
    ScanShape s{lengths, 70, 16};
    s.dt_proj = true;
    s.dtype = DType::BF16;
    s.rank = 16;
    s.dt_low_apart = lengths.size() > 1;
    add_scan(s);
  }
}

}  // namespace mb::test

// SPDX-License-Identifier: MIT
// Cases of the ops that move rows: embed (every table dtype), write_rows, argmax (ties, NaNs,
// signed zeros) and append_rows (growing state parts at positions that cross an allocation block).
#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <tuple>

#include "common/op_cases.h"
#include "common/test_util.h"
#include "io/safetensors.h"
#include "ops/argmax.h"
#include "ops/quant.h"

namespace mb::test {
namespace {

// NMSE of a quantized table against the floats it was made from, for values uniform in [-1, 1]:
// rounding to a grid of step d leaves an error uniform over d, of variance d^2 / 12 against the
// values' 1 / 3, so NMSE d^2 / 4; d is 1/127 for Q8_0 (scale amax / 127), 1/8 for Q4_0
// (amax / 8), about 2/15 for Q4_K (15 steps from a sub-block's min to its max) and 1/32 for
// Q6_K (amax / 32). The tolerance is twice that.
double quantization_nmse(DType dtype) {
  double step = 0.0;
  switch (dtype) {
    case DType::Q8_0:
      step = 1.0 / 127;
      break;
    case DType::Q4_0:
      step = 1.0 / 8;
      break;
    case DType::Q4_K:
      step = 2.0 / 15;
      break;
    case DType::Q6_K:
      step = 1.0 / 32;
      break;
    default:
      return 0.0;
  }
  return 2.0 * step * step / 4.0;
}

struct EmbedShape {
  DType dtype;
  int64_t vocab, cols;
  std::vector<int32_t> tokens;
  bool strided = false;  // y's rows a float wider than the table's
};

void embed_body(const EmbedShape& s, OpRun& run) {
  const std::vector<float> values = random_floats(s.vocab * s.cols, 1);
  std::vector<uint8_t> table;
  if (dtype_is_quantized(s.dtype)) {
    const size_t row_bytes = dtype_row_bytes(s.dtype, s.cols);
    table.resize(s.vocab * row_bytes);
    for (int64_t r = 0; r < s.vocab; ++r)
      quantize_row(s.dtype, values.data() + r * s.cols, s.cols, table.data() + r * row_bytes);
  } else {
    table = encode_f32(values, s.dtype);
  }
  const int64_t count = static_cast<int64_t>(s.tokens.size());
  const TensorId y =
      run.tensor("y", {3, count, s.cols, s.cols + (s.strided ? 1 : 0)}, random_floats(count * s.cols, 2));
  run.writes(y, dtype_is_quantized(s.dtype) ? Check::Nmse : Check::Exact);
  run.round([&](const Backend& backend, Stream& stream) {
    backend.embed(stream, {table.data(), s.dtype, s.cols, s.tokens, run.view(y)});
  });
  run.reference([&] {
    // Float tables widen exactly; quantized rows approximate the floats they were made from.
    float* out = run.host(y);
    for (int64_t t = 0; t < count; ++t)
      for (int64_t c = 0; c < s.cols; ++c)
        out[t * run.rows(y).ld + c] = dtype_is_quantized(s.dtype)
                                          ? values[s.tokens[t] * s.cols + c]
                                          : load_as_f32(table.data(), s.dtype, s.tokens[t] * s.cols + c);
  });
}

void write_rows_body(int64_t rows, int64_t cols, int64_t ld, OpRun& run) {
  const std::vector<float> host = random_floats(rows * cols, 3);
  const TensorId y = run.tensor("y", {5, rows, cols, ld}, random_floats(rows * cols, 4));
  run.writes(y, Check::Exact);
  run.round([&](const Backend& backend, Stream& stream) {
    backend.write_rows(stream, {host.data(), rows, cols, run.view(y)});
  });
  run.reference([&] {
    for (int64_t r = 0; r < rows; ++r) std::copy_n(host.data() + r * cols, cols, run.host(y) + r * ld);
  });
}

void argmax_body(int64_t cols, OpRun& run) {
  // Rows shorter and longer than a workgroup, ties (the lowest index wins), a NaN (skipped), a row
  // of NaNs (0), -0 against +0 (equal: the first), the largest value last, and first and last.
  const int64_t rows = 6;
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> x = random_floats(rows * cols, static_cast<uint64_t>(cols));
  for (float& v : x) v = std::round(v * 3.0f);  // many ties
  x[1 * cols + cols / 2] = nan;
  for (int64_t c = 0; c < cols; ++c) x[2 * cols + c] = nan;
  for (int64_t c = 0; c < cols; ++c) x[3 * cols + c] = (c % 2) ? 0.0f : -0.0f;
  x[4 * cols + cols - 1] = 100.0f;
  x[5 * cols] = 100.0f;
  if (cols > 1) x[5 * cols + cols - 1] = 100.0f;
  const TensorId in = run.tensor("x", {2, rows, cols, cols + 3}, x);
  const TensorId y = run.tensor("y", {1, 1, rows}, std::vector<float>(rows, -1.0f));
  run.writes(y, Check::Exact);
  run.round([&](const Backend& backend, Stream& stream) {
    backend.argmax(stream, {run.view(in), rows, cols, run.view(y)});
  });
  run.reference([&] {
    for (int64_t r = 0; r < rows; ++r)
      run.host(y)[r] = static_cast<float>(greedy_index(run.host(in) + r * (cols + 3), cols));
  });
}

struct AppendShape {
  std::vector<int64_t> lengths, positions;
  int64_t cols;
  bool contiguous;    // x's rows without padding (Vulkan copies each part at once, else each row)
  int64_t piece = 0;  // also one position of each part per round
};

void append_body(const AppendShape& s, OpRun& run) {
  const PartRows layout = part_rows(s.lengths);
  // Two growing parts (3 floats a position, then cols); the op appends to the second.
  const StateShape shape{5, {3, s.cols}};
  const Rows x_rows{1, layout.total_rows, s.cols, s.contiguous ? s.cols : s.cols + 2};
  const TensorId x = run.tensor("x", x_rows, random_floats(layout.total_rows * s.cols, 5));
  std::vector<std::vector<StateId>> ways;
  for (int64_t piece : ways_to_run(s.piece)) {
    std::vector<StateId> states;
    for (size_t p = 0; p < s.lengths.size(); ++p) {
      const int64_t at = s.positions[p], after = at + s.lengths[p];
      states.push_back(run.state("state of part " + std::to_string(p) + (piece > 0 ? " in pieces" : ""),
                                 shape, at, after, random_floats(shape.host_floats(at), 6 + p)));
      // The appended positions of the second growing part, in the host form of `after` positions.
      // The first part's new positions were never written (a model appends to every growing
      // part): a device leaves them as allocated.
      run.writes(states.back(), Check::Exact, 5 + 3 * after + s.cols * at, s.cols * s.lengths[p],
                 "appended rows");
      run.writes(states.back(), Check::Scratch, 5 + 3 * at, 3 * s.lengths[p], "first part's new positions");
    }
    ways.push_back(states);
  }
  if (ways.size() > 1) run.same_bits(ways[0], ways[1]);
  // Parts append at their own positions, so run_parts (positions from 0) does not serve here.
  const int64_t longest = *std::max_element(s.lengths.begin(), s.lengths.end());
  for (size_t way = 0; way < ways.size(); ++way) {
    const int64_t step = way == 0 ? longest : s.piece;
    for (int64_t t0 = 0; t0 < longest; t0 += step) {
      run.round([&](const Backend& backend, Stream& stream) {
        std::vector<Part> parts;
        for (size_t p = 0; p < s.lengths.size(); ++p)
          if (t0 < s.lengths[p])
            parts.push_back({run.storage(ways[way][p]), layout.first_rows[p] + t0,
                             std::min(step, s.lengths[p] - t0), s.positions[p] + t0});
        backend.append_rows(stream, {run.view(x), s.cols, 1, parts});
      });
    }
  }
  run.reference([&] {
    for (const std::vector<StateId>& states : ways) {
      for (size_t p = 0; p < s.lengths.size(); ++p) {
        const int64_t at = s.positions[p], after = at + s.lengths[p];
        float* to = run.host(states[p]) + 5 + 3 * after + s.cols * at;
        for (int64_t r = 0; r < s.lengths[p]; ++r)
          std::copy_n(run.host(x) + (layout.first_rows[p] + r) * x_rows.ld, s.cols, to + r * s.cols);
      }
    }
  });
}

}  // namespace

void add_row_op_cases(std::vector<OpCase>& cases) {
  using enum DType;
  for (DType dtype : {F32, BF16, F16, Q8_0, Q4_0, Q4_K, Q6_K}) {
    const int64_t cols = dtype_block_weights(dtype) == 256 ? 512 : (dtype_is_quantized(dtype) ? 96 : 37);
    for (const std::vector<int32_t>& tokens : {std::vector<int32_t>{5}, {0, 12, 3, 3, 7, 1, 12, 0, 9}}) {
      const EmbedShape s{dtype, 13, cols, tokens, tokens.size() > 1 && dtype != F16};
      const std::string vars = std::string(dtype_name(dtype)) + " vocab=13 cols=" + std::to_string(cols) +
                               " tokens=" + std::to_string(tokens.size()) + (s.strided ? " strided" : "");
      const double tolerance = dtype_is_quantized(dtype) ? quantization_nmse(dtype) : kFloatNmse;
      cases.push_back({"embed", vars, tolerance, {}, false, [s](OpRun& run) { embed_body(s, run); }});
    }
  }
  // Rows at an offset, contiguous (one copy on Vulkan) and with a row stride (a copy per row).
  for (const auto& [rows, cols, ld] : std::vector<std::tuple<int64_t, int64_t, int64_t>>{
           {0, 5, 5}, {1, 1, 1}, {3, 7, 7}, {9, 64, 64}, {3, 7, 10}, {9, 64, 65}}) {
    const std::string vars = "rows=" + std::to_string(rows) + " cols=" + std::to_string(cols) +
                             (ld > cols ? " ld=" + std::to_string(ld) : "");
    cases.push_back({"write_rows", vars, kFloatNmse, {}, false, [rows, cols, ld](OpRun& run) {
                       write_rows_body(rows, cols, ld, run);
                     }});
  }
  for (int64_t cols : {1, 5, 64, 65, 1000})
    cases.push_back({"argmax",
                     "rows=6 cols=" + std::to_string(cols),
                     kFloatNmse,
                     {{OpKind::Argmax}},
                     false,
                     [cols](OpRun& run) { argmax_body(cols, run); }});
  // Positions from 0, and across a block of kStateBlockPositions (255 + 2, 250 + 17), where the
  // reserve before the round reallocates the growing parts.
  const std::vector<AppendShape> appends = {
      {{4}, {0}, 8, true},
      {{5, 1, 2}, {0, 3, 255}, 8, false},
      {{5, 1, 17}, {7, 0, 250}, 33, true, 1},
      {many_parts(), std::vector<int64_t>(many_parts().size(), 254), 3, false}};
  for (const AppendShape& s : appends) {
    const std::string vars = describe_parts(s.lengths) +
                             " positions=" + (s.lengths.size() > 4 ? "254" : join(s.positions)) +
                             " cols=" + std::to_string(s.cols) + (s.contiguous ? " contiguous" : "") +
                             (s.piece > 0 ? " pieces=1" : "");
    cases.push_back(
        {"append_rows", vars, kFloatNmse, {{OpKind::AppendRows}}, s.lengths.size() > 1, [s](OpRun& run) {
           append_body(s, run);
         }});
  }
}

}  // namespace mb::test

// SPDX-License-Identifier: MIT
#include "common/op_harness.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <sstream>

#include "common/test_util.h"
#include "ops/quant.h"
#include "ops/quant_matmul.h"

namespace mb::test {
namespace {

constexpr int kMaxGpuParts = 16;  // vulkan::kMaxGpuParts (this library builds without the backend)

int64_t stride(const Rows& rows) {
  return rows.ld > 0 ? rows.ld : rows.cols;
}

// Floats a buffer needs for its view, and one float of padding past the last row's end.
int64_t buffer_floats(const Rows& rows) {
  return rows.offset + rows.rows * stride(rows) + 1;
}

template <typename F>
void for_each_index(const Rows& rows, F&& f) {
  for (int64_t r = 0; r < rows.rows; ++r)
    for (int64_t c = 0; c < rows.cols; ++c) f(rows.offset + r * stride(rows) + c);
}

bool same_float_bits(float a, float b) {
  return std::memcmp(&a, &b, sizeof(float)) == 0;
}

std::string show(float v) {
  std::ostringstream text;
  text.precision(9);
  text << v;
  return text.str();
}

// Where float `index` of `c` lies: "y[17] (row 2, column 3 of y part 1)".
std::string locate(const Contents& c, const Region* region, int64_t index) {
  std::string where = c.name + "[" + std::to_string(index) + "]";
  const Rows& rows = region != nullptr ? region->rows : c.view;
  const int64_t from = index - rows.offset, ld = stride(rows);
  if (rows.cols == 0 || from < 0 || from >= rows.rows * ld)
    return where + (region != nullptr ? " (" + region->what + ")" : " (outside what the ops write)");
  return where + " (row " + std::to_string(from / ld) + ", column " + std::to_string(from % ld) + " of " +
         (region != nullptr ? region->what : "the view, which the ops do not write") + ")";
}

double angle_distance(double a, double b) {
  const double d = std::fabs(a - b);
  return std::min(d, 2 * M_PI - d);
}

// The region check of one region of `got` against the reference; returns its NMSE (Nmse regions).
double check_region(const Contents& got, const Contents& want, const Region& r, double tolerance,
                    const std::string& on) {
  std::vector<float> g, w;
  for_each_index(r.rows, [&](int64_t i) {
    g.push_back(got.final[i]);
    w.push_back(want.final[i]);
  });
  switch (r.check) {
    case Check::Nmse: {
      const double error = nmse(g, std::vector<double>(w.begin(), w.end()));
      if (!(error <= tolerance))
        ADD_FAILURE() << on << ": " << r.what << " NMSE " << error << " > " << tolerance << " (max abs error "
                      << max_abs_diff(g, w) << ")";
      return error;
    }
    case Check::Exact: {
      const long diff = first_bit_difference(g, w);
      if (diff >= 0)
        ADD_FAILURE() << on << ": " << r.what << " element " << diff << " is " << show(g[diff])
                      << ", the reference " << show(w[diff]) << " (exact)";
      return 0.0;
    }
    case Check::Angles: {
      double worst = 0.0;
      for (size_t i = 0; i < g.size(); ++i) worst = std::max(worst, angle_distance(g[i], w[i]));
      if (!(worst <= kAngleTolerance))
        ADD_FAILURE() << on << ": " << r.what << " angles " << worst << " rad from the reference";
      return 0.0;
    }
    case Check::Bits:
    case Check::Scratch:
      return 0.0;
  }
  return 0.0;
}

// Each float's region (null: outside every region).
std::vector<const Region*> region_map(const Contents& c) {
  std::vector<const Region*> map(c.initial.size(), nullptr);
  for (const Region& r : c.regions) for_each_index(r.rows, [&](int64_t i) { map[i] = &r; });
  return map;
}

}  // namespace

OpRun::OpRun(const Backend* backend, const ComputeContext& ctx) : backend_(backend), ctx_(ctx) {
  if (backend_ != nullptr) stream_ = backend_->new_stream();
}

OpRun::~OpRun() = default;

size_t OpRun::add(std::string name, std::vector<float> initial, Item item) {
  Contents c;
  c.name = std::move(name);
  c.initial = std::move(initial);
  if (is_reference()) c.final = c.initial;
  record_.contents.push_back(std::move(c));
  items_.push_back(std::move(item));
  return items_.size() - 1;
}

TensorId OpRun::tensor(std::string name, Rows rows, const std::vector<float>& values) {
  if (rows.ld == 0) rows.ld = rows.cols;
  MB_CHECK(static_cast<int64_t>(values.size()) == rows.rows * rows.cols && rows.ld >= rows.cols);
  std::vector<float> initial(static_cast<size_t>(buffer_floats(rows)), kPadding);
  for (int64_t r = 0; r < rows.rows; ++r)
    std::copy_n(values.data() + r * rows.cols, rows.cols, initial.data() + rows.offset + r * rows.ld);
  Item item;
  item.rows = rows;
  const size_t index = add(std::move(name), std::move(initial), std::move(item));
  record_.contents[index].view = rows;
  return {index};
}

void OpRun::writes(TensorId t, Check check, int64_t first_row, int64_t rows, int64_t column, int64_t cols,
                   std::string what) {
  const Rows& view = items_.at(t.index).rows;
  if (cols < 0) cols = view.cols - column;
  MB_CHECK(first_row >= 0 && first_row + rows <= view.rows && column >= 0 && column + cols <= view.cols);
  Contents& c = record_.contents[t.index];
  Region r{what.empty() ? c.name : c.name + " " + what,
           {view.offset + first_row * view.ld + column, rows, cols, view.ld},
           check};
  c.regions.push_back(std::move(r));
}

void OpRun::writes(TensorId t, Check check) {
  writes(t, check, 0, items_.at(t.index).rows.rows);
}

WeightsId OpRun::weights(const std::vector<float>& values, int64_t offset) {
  std::vector<float>& held = vectors_.emplace_back(static_cast<size_t>(offset), kPadding);
  held.insert(held.end(), values.begin(), values.end());
  vector_offsets_.push_back(offset);
  if (!is_reference())
    vector_storage_.push_back(backend_->upload_floats(held.data(), static_cast<int64_t>(held.size())));
  return {vectors_.size() - 1};
}

MatrixId OpRun::matrix(DType dtype, int64_t rows, int64_t cols, const std::vector<float>& values) {
  MB_CHECK(static_cast<int64_t>(values.size()) == rows * cols);
  std::vector<uint8_t>& packed = packed_.emplace_back();
  if (dtype_is_quantized(dtype)) {
    const size_t row_bytes = dtype_row_bytes(dtype, cols);
    std::vector<uint8_t> blocks(static_cast<size_t>(rows) * row_bytes);
    for (int64_t n = 0; n < rows; ++n)
      quantize_row(dtype, values.data() + n * cols, cols, blocks.data() + n * row_bytes);
    packed = pack_quantized(blocks.data(), dtype, rows, cols);
  } else {
    packed = pack_weights(values.data(), DType::F32, rows, cols, dtype);
  }
  matrices_.push_back({packed.data(), dtype, rows, cols});
  if (!is_reference()) matrix_storage_.push_back(backend_->upload_matrix(matrices_.back()));
  return {matrices_.size() - 1};
}

StateId OpRun::state(std::string name, const StateShape& shape, int64_t positions, int64_t positions_after,
                     std::vector<float> host) {
  MB_CHECK(static_cast<int64_t>(host.size()) == shape.host_floats(positions));
  Item item;
  item.is_state = true;
  item.shape = shape;
  item.positions = positions;
  item.positions_after = positions_after;
  if (!is_reference()) {
    item.storage = backend_->adopt_state(shape, positions, host);
    item.storage->reserve(positions_after);
  }
  // The initial contents in the form downloaded after the run, the host form of positions_after
  // positions: each growing part's used positions, then zeros where the ops append.
  std::vector<float> grown(host.begin(), host.begin() + shape.fixed_floats);
  const float* from = host.data() + shape.fixed_floats;
  for (int64_t per_position : shape.growing) {
    grown.insert(grown.end(), from, from + per_position * positions);
    grown.insert(grown.end(), static_cast<size_t>(per_position * (positions_after - positions)), 0.0f);
    from += per_position * positions;
  }
  host = std::move(grown);
  return {add(std::move(name), std::move(host), std::move(item))};
}

void OpRun::writes(StateId s, Check check, int64_t offset, int64_t count, std::string what) {
  Contents& c = record_.contents[s.index];
  MB_CHECK(items_.at(s.index).is_state);
  c.regions.push_back({what.empty() ? c.name : c.name + " " + what, {offset, 1, count, count}, check});
}

void OpRun::same_bits(TensorId a, TensorId b) {
  record_.same_bits.emplace_back(a.index, b.index);
}

void OpRun::same_bits(StateId a, StateId b) {
  record_.same_bits.emplace_back(a.index, b.index);
}

void OpRun::same_bits(const std::vector<StateId>& a, const std::vector<StateId>& b) {
  MB_CHECK(a.size() == b.size());
  for (size_t i = 0; i < a.size(); ++i) same_bits(a[i], b[i]);
}

void OpRun::start() {
  // Every buffer is one row of a Stream buffer of its own; views are its rows.
  for (size_t i = 0; i < items_.size(); ++i) {
    Item& item = items_[i];
    if (item.is_state) continue;
    const int64_t floats = static_cast<int64_t>(record_.contents[i].initial.size());
    item.buffer = stream_->buffer(static_cast<int>(i), 1, floats, Access::HostRead);
  }
}

void OpRun::round(const std::function<void(const Backend&, Stream&)>& ops) {
  if (is_reference()) return;
  if (rounds_ == 0) start();
  // Each round records afresh: a repeated key would replay the previous round's recording.
  const uint64_t key[] = {static_cast<uint64_t>(rounds_)};
  backend_->begin_round(*stream_, ctx_, key);
  try {
    if (rounds_ == 0) {
      for (size_t i = 0; i < items_.size(); ++i) {
        if (items_[i].is_state) continue;
        const std::vector<float>& initial = record_.contents[i].initial;
        const int64_t floats = static_cast<int64_t>(initial.size());
        backend_->write_rows(*stream_, {initial.data(), 1, floats, items_[i].buffer});
      }
    }
    ops(*backend_, *stream_);
  } catch (...) {
    backend_->cancel_round(*stream_);
    throw;
  }
  backend_->end_round(*stream_);
  ++rounds_;
}

void OpRun::reference(const std::function<void()>& compute) {
  if (is_reference()) compute();
}

View OpRun::view(TensorId t) const {
  const Item& item = items_.at(t.index);
  MB_CHECK(!is_reference() && item.buffer);
  return {item.buffer.storage, item.rows.offset, item.rows.ld};
}

View OpRun::view(WeightsId w) const {
  MB_CHECK(!is_reference());
  return {vector_storage_.at(w.index).get(), vector_offsets_.at(w.index), 0};
}

Matrix OpRun::matrix(MatrixId m) const {
  MB_CHECK(!is_reference());
  const WeightMatrix& w = matrices_.at(m.index);
  return {matrix_storage_.at(m.index).get(), w.dtype, w.rows, w.cols};
}

StateStorage* OpRun::storage(StateId s) const {
  MB_CHECK(!is_reference());
  return items_.at(s.index).storage.get();
}

float* OpRun::host(TensorId t) {
  MB_CHECK(is_reference());
  return record_.contents.at(t.index).final.data() + items_[t.index].rows.offset;
}

const float* OpRun::host(WeightsId w) const {
  return vectors_.at(w.index).data() + vector_offsets_.at(w.index);
}

WeightMatrix OpRun::host(MatrixId m) const {
  return matrices_.at(m.index);
}

float* OpRun::host(StateId s) {
  MB_CHECK(is_reference() && items_.at(s.index).is_state);
  return record_.contents[s.index].final.data();
}

const Rows& OpRun::rows(TensorId t) const {
  return items_.at(t.index).rows;
}

OpRecord OpRun::finish() {
  if (!is_reference()) {
    MB_CHECK(rounds_ > 0);
    for (size_t i = 0; i < items_.size(); ++i) {
      Item& item = items_[i];
      Contents& c = record_.contents[i];
      if (item.is_state) {
        c.final.resize(static_cast<size_t>(item.shape.host_floats(item.positions_after)));
        item.storage->download(item.positions_after, c.final);
      } else {
        c.final.resize(c.initial.size());
        backend_->read_rows(*stream_, item.buffer, 1, static_cast<int64_t>(c.final.size()), c.final.data());
      }
    }
  }
  return std::move(record_);
}

PartRows part_rows(const std::vector<int64_t>& lengths) {
  PartRows layout{lengths, std::vector<int64_t>(lengths.size()), 0};
  for (size_t i = lengths.size(); i-- > 0;) {
    layout.first_rows[i] = layout.total_rows + 1;
    layout.total_rows += lengths[i] + 1;
  }
  return layout;
}

std::vector<int64_t> many_parts() {
  std::vector<int64_t> lengths;
  for (int i = 0; i < kMaxGpuParts + 3; ++i) lengths.push_back(1 + i % 3);
  return lengths;
}

std::string describe_parts(const std::vector<int64_t>& lengths) {
  if (lengths == many_parts()) return "parts=" + std::to_string(lengths.size()) + "x(1..3)";
  return "parts=" + join(lengths);
}

std::vector<StateId> part_states(OpRun& run, const std::string& name, const PartRows& layout,
                                 int64_t fixed_floats, const std::vector<StateRegion>& written,
                                 const std::function<std::vector<float>(size_t part)>& initial) {
  std::vector<StateId> states;
  for (size_t p = 0; p < layout.lengths.size(); ++p) {
    states.push_back(run.state(name + " of part " + std::to_string(p), {fixed_floats, {}}, 0, 0, initial(p)));
    for (const StateRegion& r : written) run.writes(states.back(), r.check, r.offset, r.count, r.what);
  }
  return states;
}

void writes_parts(OpRun& run, TensorId t, const PartRows& layout, Check check) {
  for (size_t p = 0; p < layout.lengths.size(); ++p)
    run.writes(t, check, layout.first_rows[p], layout.lengths[p], 0, -1, "part " + std::to_string(p));
}

std::vector<int64_t> ways_to_run(int64_t piece) {
  return piece > 0 ? std::vector<int64_t>{0, piece} : std::vector<int64_t>{0};
}

void run_parts(OpRun& run, const PartRows& layout, const std::vector<StateId>& states, int64_t piece,
               const std::function<void(const Backend&, Stream&, std::span<const Part>)>& op) {
  int64_t longest = 0;
  for (int64_t length : layout.lengths) longest = std::max(longest, length);
  const int64_t step = piece > 0 ? piece : longest;
  for (int64_t t0 = 0; t0 < longest; t0 += step) {
    run.round([&](const Backend& backend, Stream& stream) {
      std::vector<Part> parts;
      for (size_t p = 0; p < states.size(); ++p) {
        if (t0 >= layout.lengths[p]) continue;
        parts.push_back(
            {run.storage(states[p]), layout.first_rows[p] + t0, std::min(step, layout.lengths[p] - t0), t0});
      }
      op(backend, stream, parts);
    });
  }
}

std::string join(const std::vector<int64_t>& values) {
  std::string text;
  for (size_t i = 0; i < values.size(); ++i) {
    if (i > 0) text += ',';
    text += std::to_string(values[i]);
  }
  return text;
}

OpRecord run_op(const std::function<void(OpRun&)>& body, const Backend* backend, const ComputeContext& ctx) {
  OpRun run(backend, ctx);
  body(run);
  return run.finish();
}

double expect_record(const OpRecord& got, const OpRecord& reference, const OpRecord* baseline,
                     double tolerance, const std::string& on) {
  double worst = 0.0;
  EXPECT_EQ(got.contents.size(), reference.contents.size()) << on;
  for (size_t i = 0; i < got.contents.size() && i < reference.contents.size(); ++i) {
    const Contents& c = got.contents[i];
    const Contents& want = reference.contents[i];
    if (c.final.size() != want.final.size()) {
      ADD_FAILURE() << on << ": " << c.name << " holds " << c.final.size() << " floats, the reference "
                    << want.final.size();
      continue;
    }
    const std::vector<const Region*> map = region_map(c);
    for (size_t j = 0; j < c.final.size(); ++j) {
      if (map[j] != nullptr || same_float_bits(c.final[j], want.initial[j])) continue;
      ADD_FAILURE() << on << ": " << locate(c, nullptr, static_cast<int64_t>(j)) << " changed from "
                    << show(want.initial[j]) << " to " << show(c.final[j]);
      break;
    }
    for (const Region& r : c.regions) worst = std::max(worst, check_region(c, want, r, tolerance, on));
    if (baseline == nullptr) continue;
    const Contents& base = baseline->contents.at(i);
    for (size_t j = 0; j < c.final.size(); ++j) {
      if ((map[j] != nullptr && map[j]->check == Check::Scratch) ||
          same_float_bits(c.final[j], base.final[j]))
        continue;
      ADD_FAILURE() << on << ": " << locate(c, map[j], static_cast<int64_t>(j)) << " is " << show(c.final[j])
                    << ", the baseline's " << show(base.final[j]);
      break;
    }
  }
  for (const auto& [a, b] : got.same_bits) {
    const Contents &first = got.contents.at(a), &second = got.contents.at(b);
    const std::vector<const Region*> map = region_map(first);
    EXPECT_EQ(first.final.size(), second.final.size()) << on;
    for (size_t j = 0; j < first.final.size() && j < second.final.size(); ++j) {
      if ((map[j] != nullptr && map[j]->check == Check::Scratch) ||
          same_float_bits(first.final[j], second.final[j]))
        continue;
      ADD_FAILURE() << on << ": " << locate(first, map[j], static_cast<int64_t>(j)) << " is "
                    << show(first.final[j]) << ", in " << second.name << " " << show(second.final[j]);
      break;
    }
  }
  return worst;
}

}  // namespace mb::test

// SPDX-License-Identifier: MIT
// The CPU entry points of the mixture-of-experts op (ops/moe.h): the router product, the routing
// kernel, then each chosen expert's two products over the block of rows routed to it (the
// ordinary matmul and glu entry points, whose per-output chains do not depend on the rows), and
// the weighted sums, through the kernels of the context's instruction set.
#include <algorithm>
#include <cstring>
#include <span>
#include <vector>

#include "core/error.h"
#include "ops/cpu/vec16.h"
#include "ops/moe.h"
#include "ops/quant_matmul.h"

namespace mb {
namespace {

// A group's rows quantized once for products with quantized weights (ops/quant_matmul.h: each
// row on its own, so these are the values the product would make), since the product's items,
// which split its outputs, would otherwise each quantize the same rows again.
struct QuantRows {
  DType dtype = DType::F32;  // the weights' dtype; f32 when they are not quantized
  int64_t k = 0, block = 0;
  std::vector<int8_t> q;        // [rows, k]
  std::vector<float> scales;    // [rows, k / block]
  std::vector<int32_t> sums16;  // [rows, k / 16]

  void prepare(DType weights, int64_t rows, int64_t cols) {
    dtype = dtype_is_quantized(weights) ? weights : DType::F32;
    if (dtype == DType::F32) return;
    k = cols;
    block = activation_block(dtype);
    const auto n = static_cast<size_t>(rows);
    if (q.size() < n * k) q.resize(n * k);
    if (scales.size() < n * (k / block)) scales.resize(n * (k / block));
    if (sums16.size() < n * (k / 16)) sums16.resize(n * (k / 16));
  }
  void quantize(const cpu::QuantKernels& kernels, const float* x, int64_t row) {
    if (dtype != DType::F32)
      kernels.quantize(x, k, block, q.data() + row * k, scales.data() + row * (k / block),
                       sums16.data() + row * (k / 16));
  }
  cpu::QuantActivations at(int64_t row) const {
    return {q.data() + row * k, scales.data() + row * (k / block), sums16.data() + row * (k / 16), k, block};
  }
};

// The rows routed to each expert, grouped by expert in ascending order and, within an expert, in
// row order, with the weight each row gives it. Per calling thread, so concurrent forward calls
// never share it; grown once and then reused.
struct ExpertRows {
  std::vector<int32_t> first;        // [n_experts + 1]: expert e's entries are [first[e], first[e + 1])
  std::vector<int32_t> rows;         // [m * top_k]
  std::vector<float> weights;        // [m * top_k]
  std::vector<int32_t> active;       // the experts with rows, ascending
  std::vector<int32_t> group_first;  // group i is active[group_first[i] .. group_first[i + 1])
  QuantRows up_rows, down_rows;      // the group's rows and hidden rows, quantized
};

thread_local ExpertRows expert_rows;

// Outputs per product item (two panels: a single row's product then keeps the decode kernel's
// two-panel blocks), and columns per item of the weighted sums.
constexpr int64_t kItemOutputs = 2 * kPanelWidth;
constexpr int64_t kSumColumns = 256;

void group_by_expert(const MoeParams& p, const float* routes, int64_t ld_routes, int64_t m, ExpertRows& g) {
  const int64_t k = p.top_k;
  g.first.assign(static_cast<size_t>(p.n_experts + 1), 0);
  if (g.rows.size() < static_cast<size_t>(m * k)) {
    g.rows.resize(static_cast<size_t>(m * k));
    g.weights.resize(static_cast<size_t>(m * k));
  }
  auto expert = [&](int64_t r, int64_t j) { return static_cast<int64_t>(routes[r * ld_routes + j]); };
  for (int64_t r = 0; r < m; ++r)
    for (int64_t j = 0; j < k; ++j) ++g.first[expert(r, j) + 1];
  for (int64_t e = 0; e < p.n_experts; ++e) g.first[e + 1] += g.first[e];
  // A counting sort: each expert's next free entry, filled in row order.
  for (int64_t r = 0; r < m; ++r)
    for (int64_t j = 0; j < k; ++j) {
      const int32_t at = g.first[expert(r, j)]++;
      g.rows[at] = static_cast<int32_t>(r);
      g.weights[at] = routes[r * ld_routes + k + j];
    }
  // The fill moved each start to the next expert's: shift them back.
  for (int64_t e = p.n_experts; e > 0; --e) g.first[e] = g.first[e - 1];
  g.first[0] = 0;
}

// Splits the experts with rows into groups of consecutive ones whose rows fit `capacity`.
void group_experts(const MoeParams& p, int64_t capacity, ExpertRows& g) {
  g.active.clear();
  g.group_first.clear();
  int64_t rows = 0;
  for (int64_t e = 0; e < p.n_experts; ++e) {
    const int64_t n = g.first[e + 1] - g.first[e];
    if (n == 0) continue;  // no row chose it: its weights are never read
    if (g.group_first.empty() || rows + n > capacity) {
      g.group_first.push_back(static_cast<int32_t>(g.active.size()));
      rows = 0;
    }
    g.active.push_back(static_cast<int32_t>(e));
    rows += n;
  }
  g.group_first.push_back(static_cast<int32_t>(g.active.size()));
}

// One product of every expert of a group, as a worksharing loop of the enclosing parallel region:
// items of (expert, kItemOutputs outputs), handed out dynamically, since the experts of a group
// have different numbers of rows. Expert e's rows start at row (first[e] - first) of x and y.
void expert_products(const ComputeContext& one, const cpu::KernelTable& kernels, const ExpertRows& g,
                     int32_t e0, int64_t experts, std::span<const WeightMatrix> w, const float* x,
                     int64_t ldx, float* y, int64_t ldy, const QuantRows& quantized) {
  const int64_t first = g.first[g.active[e0]];
  const int64_t items = (w[g.active[e0]].rows + kItemOutputs - 1) / kItemOutputs;
#pragma omp for schedule(dynamic)
  for (int64_t item = 0; item < experts * items; ++item) {
    const int64_t e = g.active[e0 + item / items], at = g.first[e] - first;
    const int64_t n0 = item % items * kItemOutputs;
    const MatmulArgs args{
        x + at * ldx,      ldx, g.first[e + 1] - g.first[e], output_range(w[e], n0, kItemOutputs), nullptr,
        y + at * ldy + n0, ldy};
    if (quantized.dtype != DType::F32 && args.w.dtype == quantized.dtype)
      kernels.quant.matmul(args, quantized.at(at), 1);
    else
      matmul(one, args);
  }
}

void check(const MoeParams& p, const MoeWeights& w, const MoeArgs& a, const MoeScratch& s) {
  MB_CHECK(p.d_model > 0 && p.n_experts > 0 && p.top_k >= 1 && p.top_k <= p.n_experts && p.width > 0);
  MB_CHECK(w.router.rows == p.n_experts && w.router.cols == p.d_model && w.router.dtype == DType::F32);
  MB_CHECK(static_cast<int64_t>(w.up.size()) == p.n_experts &&
           static_cast<int64_t>(w.down.size()) == p.n_experts);
  const int64_t de = p.expert_dim();
  for (int64_t e = 0; e < p.n_experts; ++e) {
    MB_CHECK(w.up[e].rows == p.up_rows() && w.up[e].cols == de);
    MB_CHECK(w.down[e].rows == de && w.down[e].cols == p.width);
  }
  MB_CHECK(p.latent >= 0 && (a.xe != nullptr || p.latent == 0) && (a.xe == nullptr || a.ldxe >= de));
  MB_CHECK(a.m >= 0 && a.ldx >= p.d_model && a.ldy >= de);
  MB_CHECK(s.ld_logits >= p.n_experts && s.ld_routes >= 2 * p.top_k && s.ld_rows >= de);
  MB_CHECK(s.ld_hidden >= p.up_rows() && s.ld_out >= de && s.ld_acc >= de);
  MB_CHECK(s.capacity == 0 || s.capacity >= a.m);
  MB_CHECK(a.m == 0 || (a.x && a.y && s.logits && s.routes && s.rows && s.hidden && s.out && s.acc));
}

}  // namespace

const char* moe_scoring_name(MoeScoring scoring) {
  switch (scoring) {
    case MoeScoring::SoftmaxTopK:
      return "softmax_topk";
    case MoeScoring::SigmoidBias:
      return "sigmoid_bias";
    case MoeScoring::SoftmaxAll:
      return "softmax_all";
  }
  return "?";
}

void moe_route(const ComputeContext& ctx, const MoeParams& p, const float* correction_bias,
               const float* logits, int64_t ld_logits, int64_t m, float* routes, int64_t ld_routes) {
  MB_CHECK(p.n_experts > 0 && p.top_k >= 1 && p.top_k <= p.n_experts && ld_logits >= p.n_experts &&
           ld_routes >= 2 * p.top_k);
  if (m <= 0) return;
  cpu::kernels_for(ctx.isa).moe_route(p, correction_bias, logits, ld_logits, m, routes, ld_routes,
                                      ctx.n_threads);
}

void moe_router(const ComputeContext& ctx, const MoeParams& p, const MoeWeights& w, const MoeArgs& a,
                const MoeScratch& s) {
  check(p, w, a, s);
  if (a.m == 0) return;
  matmul(ctx, {a.x, a.ldx, a.m, w.router, nullptr, s.logits, s.ld_logits});  // [m, d] -> [m, E]
  moe_route(ctx, p, w.correction_bias, s.logits, s.ld_logits, a.m, s.routes, s.ld_routes);
}

void moe(const ComputeContext& ctx, const MoeParams& p, const MoeWeights& w, const MoeArgs& a,
         const MoeScratch& s) {
  moe_router(ctx, p, w, a, s);
  moe_experts(ctx, p, w, a, s);
}

void moe_experts(const ComputeContext& ctx, const MoeParams& p, const MoeWeights& w, const MoeArgs& a,
                 const MoeScratch& s) {
  check(p, w, a, s);
  if (a.m == 0) return;
  ExpertRows& g = expert_rows;
  group_by_expert(p, s.routes, s.ld_routes, a.m, g);
  const int64_t capacity = s.capacity > 0 ? s.capacity : a.m;
  group_experts(p, capacity, g);
  // One parallel region for the whole op, not one per product: a product of a few rows is tens
  // of microseconds, and waking the threads for each (hundreds per round) cost as much as the
  // products on a machine whose threads wait passively. The phases of a group are `omp for`
  // loops over disjoint outputs (rows, or panels of one expert's outputs), each item run by one
  // thread with the single-threaded kernels, so every value is computed as before.
  ComputeContext one = ctx;
  one.n_threads = 1;
  const cpu::KernelTable& kernels = cpu::kernels_for(ctx.isa);
  // The experts' width, and their input: the latent rows, or the router's.
  const int64_t d = p.expert_dim(), m = a.m;
  const float* xe = a.xe != nullptr ? a.xe : a.x;
  const int64_t ldxe = a.xe != nullptr ? a.ldxe : a.ldx;
  const int64_t sum_items = (d + kSumColumns - 1) / kSumColumns;
  // m > 0 rows choose at least one expert, so there is an active[0].
  g.up_rows.prepare(w.up[g.active[0]].dtype, capacity, d);
  g.down_rows.prepare(w.down[g.active[0]].dtype, capacity, p.width);
#pragma omp parallel num_threads(ctx.n_threads) if (ctx.n_threads > 1)
  {
#pragma omp for schedule(static)
    for (int64_t r = 0; r < m; ++r) std::memset(s.acc + r * s.ld_acc, 0, d * sizeof(float));
    for (size_t group = 0; group + 1 < g.group_first.size(); ++group) {
      const int32_t e0 = g.group_first[group], e1 = g.group_first[group + 1];  // indexes into g.active
      const int64_t first = g.first[g.active[e0]], count = g.first[g.active[e1 - 1] + 1] - first;
      const int64_t experts = e1 - e0;
#pragma omp for schedule(static)
      for (int64_t i = 0; i < count; ++i) {  // -> rows [count, d]
        std::memcpy(s.rows + i * s.ld_rows, xe + g.rows[first + i] * ldxe, d * sizeof(float));
        g.up_rows.quantize(kernels.quant, s.rows + i * s.ld_rows, i);
      }
      expert_products(one, kernels, g, e0, experts, w.up, s.rows, s.ld_rows, s.hidden, s.ld_hidden,
                      g.up_rows);  // -> hidden [count, up rows]
#pragma omp for schedule(static)
      for (int64_t i = 0; i < count; ++i) {  // -> hidden [count, width]
        glu(one, {s.hidden + i * s.ld_hidden, s.ld_hidden, 1, p.width, p.activation,
                  s.hidden + i * s.ld_hidden, s.ld_hidden});
        g.down_rows.quantize(kernels.quant, s.hidden + i * s.ld_hidden, i);
      }
      expert_products(one, kernels, g, e0, experts, w.down, s.hidden, s.ld_hidden, s.out, s.ld_out,
                      g.down_rows);  // -> out [count, d]
      // Each row's terms are added in the group's entry order (ascending experts) within every
      // column: the threads split the columns, never a row's sequence of experts.
#pragma omp for schedule(static)
      for (int64_t item = 0; item < sum_items; ++item) {
        const int64_t c0 = item * kSumColumns, columns = std::min(kSumColumns, d - c0);
        kernels.moe_accumulate(s.out + c0, s.ld_out, g.rows.data() + first, g.weights.data() + first, count,
                               columns, s.acc + c0, s.ld_acc, 1);
      }
    }
  }
  scale_rows(ctx, {s.acc, s.ld_acc, a.m, d, 1.0f, a.accumulate, a.y, a.ldy});  // y (+)= acc
}

}  // namespace mb

// The CPU entry points of the mixture-of-experts op (ops/moe.h): the router product, the routing
// kernel, then each chosen expert's two products over the block of rows routed to it (the
// ordinary matmul and glu entry points, whose per-output chains do not depend on the rows), and
// the weighted sums, through the kernels of the context's instruction set.
#include <cstring>
#include <vector>

#include "core/error.h"
#include "ops/cpu/vec16.h"
#include "ops/moe.h"

namespace mb {
namespace {

// The rows routed to each expert, grouped by expert in ascending order and, within an expert, in
// row order, with the weight each row gives it. Per calling thread, so concurrent forward calls
// never share it; grown once and then reused.
struct ExpertRows {
  std::vector<int32_t> first;  // [n_experts + 1]: expert e's entries are [first[e], first[e + 1])
  std::vector<int32_t> rows;   // [m * top_k]
  std::vector<float> weights;  // [m * top_k]
};
thread_local ExpertRows expert_rows;

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

void check(const MoeParams& p, const MoeWeights& w, const MoeArgs& a, const MoeScratch& s) {
  MB_CHECK(p.d_model > 0 && p.n_experts > 0 && p.top_k >= 1 && p.top_k <= p.n_experts && p.width > 0);
  MB_CHECK(w.router.rows == p.n_experts && w.router.cols == p.d_model && w.router.dtype == DType::F32);
  MB_CHECK(static_cast<int64_t>(w.up.size()) == p.n_experts &&
           static_cast<int64_t>(w.down.size()) == p.n_experts);
  for (int64_t e = 0; e < p.n_experts; ++e) {
    MB_CHECK(w.up[e].rows == p.up_rows() && w.up[e].cols == p.d_model);
    MB_CHECK(w.down[e].rows == p.d_model && w.down[e].cols == p.width);
  }
  MB_CHECK(a.m >= 0 && a.ldx >= p.d_model && a.ldy >= p.d_model);
  MB_CHECK(s.ld_logits >= p.n_experts && s.ld_routes >= 2 * p.top_k && s.ld_rows >= p.d_model);
  MB_CHECK(s.ld_hidden >= p.up_rows() && s.ld_out >= p.d_model && s.ld_acc >= p.d_model);
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
  const cpu::KernelTable& kernels = cpu::kernels_for(ctx.isa);
  const int64_t d = p.d_model;
  ExpertRows& g = expert_rows;
  group_by_expert(p, s.routes, s.ld_routes, a.m, g);
  for (int64_t r = 0; r < a.m; ++r) std::memset(s.acc + r * s.ld_acc, 0, d * sizeof(float));
  for (int64_t e = 0; e < p.n_experts; ++e) {
    const int64_t first = g.first[e], n = g.first[e + 1] - first;
    if (n == 0) continue;  // no row chose it: its weights are never read
    for (int64_t i = 0; i < n; ++i)
      std::memcpy(s.rows + i * s.ld_rows, a.x + g.rows[first + i] * a.ldx, d * sizeof(float));
    matmul(ctx, {s.rows, s.ld_rows, n, w.up[e], nullptr, s.hidden, s.ld_hidden});        // -> [n, up rows]
    glu(ctx, {s.hidden, s.ld_hidden, n, p.width, p.activation, s.hidden, s.ld_hidden});  // -> [n, width]
    matmul(ctx, {s.hidden, s.ld_hidden, n, w.down[e], nullptr, s.out, s.ld_out});        // -> [n, d]
    kernels.moe_accumulate(s.out, s.ld_out, g.rows.data() + first, g.weights.data() + first, n, d, s.acc,
                           s.ld_acc, ctx.n_threads);
  }
  scale_rows(ctx, {s.acc, s.ld_acc, a.m, d, 1.0f, a.accumulate, a.y, a.ldy});  // y (+)= acc
}

}  // namespace mb

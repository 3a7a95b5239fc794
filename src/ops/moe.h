// SPDX-License-Identifier: MIT
// A mixture-of-experts feed-forward layer over m rows (Granite-4.0-H's and Nemotron-H's MoE, and
// Jamba's scoring for later): a router product, the choice of top_k experts per row and their
// weights, each chosen expert's MLP over the rows routed to it, and the weighted sum per row.
//
//   logits[r, e] = x[r] . router[e]       (ops/matmul.h with f32 weights: one fma chain over d)
//
// Scoring (per row, in f32, every exp the engine's own, ops/activations.h):
//   SoftmaxTopK  (Granite):   choose the top_k logits; w_j = exp(l_j - l_0) / sum_i exp(l_i - l_0)
//                             over the chosen (l_0 the largest)
//   SigmoidBias  (Nemotron-3, after DeepSeek-V3): s_e = 1 / (1 + exp(-l_e)); choose the top_k of
//                             s_e + correction_bias[e] (the bias steers the choice only); w_j = s_j
//   SoftmaxAll   (Jamba):     p_e = exp(l_e - max) / sum_e exp(l_e - max) over every expert;
//                             choose the top_k of p; w_j = p_j
// then, with `normalize` (norm_topk_prob), w_j = w_j / (sum_i w_i + norm_epsilon: 1e-20, LFM2's 1e-6), and
// w_j = w_j * scale (routed_scaling_factor; 1 where the model has none). Sums over the chosen or all experts
// run in 16-lane blocks from the first, then one fixed tree.
//
// The choice: the top_k largest scores in descending order (slot 0 the largest). Equal scores are
// taken in ascending expert order (the lower index first, as a stable sort would), and a NaN score
// ranks below every number, so the choice is one fixed function of the row's scores.
//
// Experts, in ascending expert order: expert e gathers the rows that chose it (in row order) into
// one block and runs its MLP as two products over that block (ops/matmul.h; quantized weights
// quantize each row on its own, ops/quant_matmul.h), never one product per row (the threads split
// a group of experts' products by output panels, each output still one chain):
//   h = glu(rows up_e^T)      (SwiGlu: up_e is [2 width, d], gate | up; ReluSquared: [width, d])
//   o = h down_e^T            [rows, d]
// and each of its rows adds its term to the row's sum: acc[r] = fma(w_e, o[r], acc[r]), from
// acc = 0, over the row's chosen experts in ascending expert order. Finally y = acc, or y = y + acc.
//
// Latent experts (Nemotron-3-Super's LatentMoE, `moe_latent_size`): the router reads x (d_model
// wide) while the experts read their own input xe and write sums of `latent` width; the block
// projects x into xe before the op and the sums back to d_model after it.
// Every product's per-output chain depends only on its depth, and each row's sum is the same fixed
// sequence of operations whichever rows share the call, so a row's result never depends on the
// batch, the chunk, the thread count or the instruction set. An expert no row chose is skipped:
// its weights are not read.
#pragma once

#include <cstdint>
#include <span>

#include "core/threading.h"
#include "ops/ffn.h"
#include "ops/matmul.h"

namespace mb {

enum class MoeScoring { SoftmaxTopK, SigmoidBias, SoftmaxAll };
const char* moe_scoring_name(MoeScoring scoring);

// The epsilon HF adds to the sum of the chosen weights before normalizing them.
inline constexpr float kMoeNormEpsilon = 1e-20f;

struct MoeParams {
  int64_t d_model = 0;
  int64_t n_experts = 0;
  int64_t top_k = 0;  // 1..n_experts
  int64_t width = 0;  // each expert's intermediate size
  Activation activation = Activation::SwiGlu;
  MoeScoring scoring = MoeScoring::SoftmaxTopK;
  bool normalize = false;  // divide the chosen weights by their sum (+ kMoeNormEpsilon)
  float scale = 1.0f;      // multiplies every weight (routed_scaling_factor)
  int64_t latent = 0;      // the experts' input and output width (moe_latent_size); 0: d_model
  // Added to the chosen weights' sum before normalizing: HF's 1e-20, or LFM2-MoE's 1e-6.
  float norm_epsilon = kMoeNormEpsilon;
  // Rows of each expert's up matrix: 2 width (gate | up) for SwiGlu, width for ReluSquared.
  int64_t up_rows() const { return activation == Activation::SwiGlu ? 2 * width : width; }
  // The width the experts read and write: latent, or d_model.
  int64_t expert_dim() const { return latent > 0 ? latent : d_model; }
};

struct MoeWeights {
  WeightMatrix router{};                   // [n_experts, d_model], f32
  const float* correction_bias = nullptr;  // [n_experts]: SigmoidBias's choice bias, or null (none)
  std::span<const WeightMatrix> up{};      // n_experts matrices [up_rows, expert_dim]
  std::span<const WeightMatrix> down{};    // n_experts matrices [expert_dim, width]
};

// Where the op keeps its intermediate values: row-major buffers of at least m rows, each row
// `ld*` floats apart; `rows`, `hidden` and `out` may hold more (`capacity`). `routes` is part of
// the result (tests read the choice there); the others are scratch.
struct MoeScratch {
  float* logits = nullptr;  // [m, n_experts]
  int64_t ld_logits = 0;
  float* routes = nullptr;  // [m, 2 top_k]: slot j's expert index (as a float), then its weight
  int64_t ld_routes = 0;
  float* rows = nullptr;  // [capacity, expert_dim]: a group of experts' gathered rows
  int64_t ld_rows = 0;
  float* hidden = nullptr;  // [capacity, up_rows]: their up product, then its activation
  int64_t ld_hidden = 0;
  float* out = nullptr;  // [capacity, expert_dim]: their down product
  int64_t ld_out = 0;
  float* acc = nullptr;  // [m, expert_dim]: each row's weighted sum
  int64_t ld_acc = 0;
  // Rows that rows, hidden and out hold; 0 means m. Experts run in groups of consecutive experts
  // whose rows fit (every expert's rows do: a row chooses an expert once), all the products of a
  // group in one parallel phase, so more room means fewer phases; moe_group_rows says how many
  // rows take the whole round in one group.
  int64_t capacity = 0;
};

// The scratch rows (capacity above) with which a round of m rows runs its experts in a single
// group, m * top_k, bounded by kMoeGroupRows (or m, if more): a decode step or a short prompt gets
// one group, a long round groups of about m rows.
inline constexpr int64_t kMoeGroupRows = 512;
inline int64_t moe_group_rows(const MoeParams& p, int64_t m) {
  const int64_t all = m * p.top_k, bound = m > kMoeGroupRows ? m : kMoeGroupRows;
  return all < bound ? all : bound;
}

struct MoeArgs {
  const float* x = nullptr;  // [m, ldx]: what the router reads (d_model floats per row)
  int64_t ldx = 0;
  int64_t m = 0;
  float* y = nullptr;  // [m, ldy]: expert_dim floats per row written (or added to)
  int64_t ldy = 0;
  bool accumulate = false;
  // What the experts read, expert_dim floats per row: null means x (then latent must be 0).
  const float* xe = nullptr;
  int64_t ldxe = 0;
};

void moe(const ComputeContext& ctx, const MoeParams& params, const MoeWeights& weights, const MoeArgs& args,
         const MoeScratch& scratch);

// moe in its two steps: the router product and the routing into scratch.routes, then the experts
// and the sums from those routes.
void moe_router(const ComputeContext& ctx, const MoeParams& params, const MoeWeights& weights,
                const MoeArgs& args, const MoeScratch& scratch);
void moe_experts(const ComputeContext& ctx, const MoeParams& params, const MoeWeights& weights,
                 const MoeArgs& args, const MoeScratch& scratch);
// The routing step alone, from the router's logits ([m, n_experts], ld_logits) to the routes
// ([m, 2 top_k]), as moe computes it.
void moe_route(const ComputeContext& ctx, const MoeParams& params, const float* correction_bias,
               const float* logits, int64_t ld_logits, int64_t m, float* routes, int64_t ld_routes);

// Plain double-precision references (tests only). moe_reference follows the definition above,
// with doubles for every value but one: an input row of a product with quantized weights is first
// quantized as the kernels do (ops/quant_matmul.h's quantize_activations, from the row rounded to
// f32), since that is part of the product's definition. The choice ranks double scores by the
// rule above. `routes` ([m, 2 top_k], ld_routes) receives the choice when not null.
void moe_reference(const MoeParams& params, const MoeWeights& weights, const MoeArgs& args,
                   float* routes = nullptr, int64_t ld_routes = 0);

}  // namespace mb

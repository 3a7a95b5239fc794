// SPDX-License-Identifier: MIT
// The throughput harness behind `mambacpp bench`: it reports positive rates for every part,
// feeds the requested number of prompt tokens through the step loop, profiles the prefill
// phases on request, and refuses meaningless options.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <optional>

#include "common/hybrid_configs.h"
#include "common/model_fixture.h"
#include "common/test_util.h"
#include "core/error.h"
#include "engine/benchmark.h"
#include "model/make_model.h"

namespace mb {
namespace {

const Model& bench_model() {
  static const std::unique_ptr<Model> model = [] {
    MakeModelOptions o;
    o.config = test::small_config(32, 2, 300);
    const std::string dir = test::make_temp_dir("bench_model");
    make_model(dir, o);
    return Model::load(dir);
  }();
  return *model;
}

TEST(Benchmark, ReportsEveryRateAndTheStepTokensAsked) {
  BenchOptions o;
  o.prompt_len = 20;
  o.gen_len = 3;
  o.repeats = 3;
  o.step_tokens = 5;
  const BenchResult r = run_benchmark(bench_model(), ComputeContext{1, best_isa()}, o);
  for (double rate : {r.prefill_tok_s, r.decode_tok_s, r.step_prefill_tok_s, r.prefill_speedup}) {
    EXPECT_TRUE(std::isfinite(rate));
    EXPECT_GT(rate, 0.0);
  }
  EXPECT_EQ(r.step_tokens, 5);
  EXPECT_EQ(r.prefill_phases.total(), 0.0) << "phases are only timed when profiling";
}

TEST(Benchmark, StepTokensDefaultToThePromptUpTo128AndProfileTimesThePhases) {
  BenchOptions o;
  o.prompt_len = 12;
  o.gen_len = 1;
  o.repeats = 1;
  o.profile = true;
  const BenchResult r = run_benchmark(bench_model(), ComputeContext{2, best_isa()}, o);
  EXPECT_EQ(r.step_tokens, 12);
  // The phases carry the architecture's names (this model is a Mamba-1).
  EXPECT_EQ(r.prefill_phases.names, bench_model().phase_names());
  EXPECT_GT(r.prefill_phases.seconds_of("in_proj gemm"), 0.0);
  EXPECT_GT(r.prefill_phases.seconds_of("selective scan+gate"), 0.0);
  EXPECT_GT(r.prefill_phases.seconds_of("lm_head gemm"), 0.0);
}

// A Granite-4.0-H-Tiny-like model in miniature: every layer a MoE (7 experts, top 2, SwiGLU
// experts 20 wide), attention in layers 1 and 3.
const Model& moe_model(std::optional<DType> load_dtype) {
  static std::map<std::optional<DType>, std::unique_ptr<Model>> models;
  auto& model = models[load_dtype];
  if (!model) {
    MakeModelOptions o;
    o.config = test::granite_moe_config("M*M*", 7, 2, 20, 64);
    o.seed = 3;
    LoadOptions load;
    load.weight_dtype = load_dtype;
    model = Model::load(test::write_model(o, "bench_moe"), load);
  }
  return *model;
}

// A dense model's decode step reads every matrix.
TEST(Benchmark, ADenseStepReadsEveryMatrix) {
  EXPECT_EQ(bench_model().step_matrix_bytes(), bench_model().matrix_bytes());
}

// A MoE step reads top_k of the E experts of each MoE block: the difference from every matrix is
// (E - top_k) experts per block, each an up [2 width, d] and a down [d, width] matrix in panels of
// 64 (float) or 16 (quantized) outputs.
TEST(Benchmark, AMoeStepReadsOnlyTheChosenExperts) {
  const int64_t d = 64, width = 20, experts = 7, top_k = 2, blocks = 4;
  const auto panels = [](int64_t rows, int64_t panel) { return (rows + panel - 1) / panel * panel; };
  struct Case {
    std::optional<DType> load;
    size_t up, down;  // one expert's packed bytes
  };
  // Q8_0 rows of 64 and of 20 (not whole blocks: kept in bf16, storable_dtype).
  const Case cases[] = {
      {std::nullopt, static_cast<size_t>(panels(2 * width, 64) * d * 4),
       static_cast<size_t>(panels(d, 64) * width * 4)},
      {DType::Q8_0, static_cast<size_t>(panels(2 * width, 16)) * dtype_row_bytes(DType::Q8_0, d),
       static_cast<size_t>(panels(d, 64) * width * 2)}};
  for (const Case& c : cases) {
    const Model& model = moe_model(c.load);
    EXPECT_EQ(model.matrix_bytes() - model.step_matrix_bytes(), blocks * (experts - top_k) * (c.up + c.down))
        << (c.load ? dtype_name(*c.load) : "as stored");
  }
}

// What a decode step reads besides the weights: the KV of the attention layers at every position
// of the context, and the fixed state (conv and SSM parts) read and written back.
TEST(Benchmark, CountsTheBytesADecodeStepReads) {
  const Model& model = moe_model(std::nullopt);
  BenchOptions o;
  o.prompt_len = 10;
  o.gen_len = 4;
  o.repeats = 1;
  o.warmups = 0;
  o.step_tokens = 1;
  const BenchResult r = run_benchmark(model, ComputeContext{1, best_isa()}, o);
  const AttentionConfig& a = model.config().hybrid.attention;
  EXPECT_EQ(r.kv_bytes_per_position, static_cast<size_t>(2 * 2 * a.n_kv_heads * a.head_dim * 4));
  EXPECT_EQ(r.fixed_state_bytes, model.state_floats() * 4);
  EXPECT_EQ(r.step_matrix_bytes, model.step_matrix_bytes());
  // Steps at positions 10..13 attend over 11..14 keys: 12.5 on average.
  EXPECT_DOUBLE_EQ(r.decode_read_bytes, static_cast<double>(r.step_matrix_bytes) +
                                            12.5 * static_cast<double>(r.kv_bytes_per_position) +
                                            2.0 * static_cast<double>(r.fixed_state_bytes));
  o.batch = 2;
  EXPECT_EQ(run_benchmark(model, ComputeContext{1, best_isa()}, o).decode_read_bytes, 0.0)
      << "a batch's step reads the union of its rows' experts: not counted";
}

// The profile splits prefill time by the kind of block; the attention core is part of attention.
TEST(Benchmark, ProfileSplitsPrefillByBlockKind) {
  BenchOptions o;
  o.prompt_len = 40;
  o.gen_len = 1;
  o.repeats = 1;
  o.step_tokens = 1;
  o.profile = true;
  const BenchResult r = run_benchmark(moe_model(std::nullopt), ComputeContext{1, best_isa()}, o);
  std::map<std::string, double> shares(r.prefill_block_shares.begin(), r.prefill_block_shares.end());
  EXPECT_EQ(shares.size(), 4u);
  double sum = 0;
  for (const std::string kind : {"mamba2", "attention", "moe", "head"}) {
    EXPECT_GT(shares[kind], 0.0) << kind;
    sum += shares[kind];
  }
  EXPECT_NEAR(sum, 1.0, 1e-9);
  EXPECT_GT(r.prefill_attention_core_share, 0.0);
  EXPECT_LT(r.prefill_attention_core_share, shares["attention"]);
  o.profile = false;
  EXPECT_TRUE(
      run_benchmark(moe_model(std::nullopt), ComputeContext{1, best_isa()}, o).prefill_block_shares.empty());
}

TEST(Benchmark, RefusesNonPositiveLengthsAndRepeats) {
  for (auto change : {+[](BenchOptions& o) { o.prompt_len = 0; }, +[](BenchOptions& o) { o.gen_len = 0; },
                      +[](BenchOptions& o) { o.repeats = 0; }, +[](BenchOptions& o) { o.warmups = -1; }}) {
    BenchOptions o;
    change(o);
    EXPECT_THROW(run_benchmark(bench_model(), ComputeContext{1, best_isa()}, o), Error);
  }
}

}  // namespace
}  // namespace mb

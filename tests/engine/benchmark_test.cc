// The throughput harness behind `mambacpp bench`: it reports positive rates for every part,
// feeds the requested number of prompt tokens through the step loop, profiles the prefill
// phases on request, and refuses meaningless options.
#include <gtest/gtest.h>

#include <cmath>

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

TEST(Benchmark, RefusesNonPositiveLengthsAndRepeats) {
  for (auto change : {+[](BenchOptions& o) { o.prompt_len = 0; }, +[](BenchOptions& o) { o.gen_len = 0; },
                      +[](BenchOptions& o) { o.repeats = 0; }}) {
    BenchOptions o;
    change(o);
    EXPECT_THROW(run_benchmark(bench_model(), ComputeContext{1, best_isa()}, o), Error);
  }
}

}  // namespace
}  // namespace mb

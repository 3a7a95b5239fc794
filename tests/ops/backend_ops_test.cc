// SPDX-License-Identifier: MIT
// Every case of the op registry (common/op_cases.h) on the CPU backend, with each instruction set
// this machine runs, on one thread and on several: within the case's tolerance of the double
// reference, and every float the bits of the scalar kernels on one thread (the exactness
// contract: the instruction set and the thread count change nothing).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <set>

#include "backends/cpu/cpu_backend.h"
#include "common/op_cases.h"
#include "common/test_util.h"

namespace mb {
namespace {

struct CpuTarget {
  ComputeContext ctx;
  std::string name;
};

// Every instruction set on one and two threads after the baseline (scalar, one thread), and the
// widest on three, whose splits of rows, panels and heads are uneven.
std::vector<CpuTarget> cpu_targets() {
  std::vector<CpuTarget> targets;
  const auto add = [&](Isa isa, int threads) {
    targets.push_back({{threads, isa},
                       std::string("cpu ") + isa_name(isa) + " " + std::to_string(threads) +
                           (threads == 1 ? " thread" : " threads")});
  };
  for (Isa isa : test::supported_isas())
    for (int threads : {1, 2})
      if (isa != Isa::Scalar || threads > 1) add(isa, threads);
  if (!test::sampled_sweeps()) add(best_isa(), 3);
  return targets;
}

class BackendOps : public ::testing::TestWithParam<const test::OpCase*> {};

TEST_P(BackendOps, MatchesTheReferenceAndTheScalarBitsOnEveryIsaAndThreadCount) {
  const test::OpCase& c = *GetParam();
  const CpuBackend cpu;
  const test::OpRecord reference = test::reference_record(c);
  const test::OpRecord scalar = test::run_op(c.body, &cpu, {1, Isa::Scalar});
  double worst = test::expect_record(scalar, reference, nullptr, c.tolerance, "cpu scalar 1 thread");
  for (const CpuTarget& target : cpu_targets()) {
    const test::OpRecord got = test::run_op(c.body, &cpu, target.ctx);
    worst = std::max(worst, test::expect_record(got, reference, &scalar, c.tolerance, target.name));
  }
  std::printf("[ nmse ] worst %.3g of %.3g allowed\n", worst, c.tolerance);
}

INSTANTIATE_TEST_SUITE_P(Registry, BackendOps,
                         ::testing::ValuesIn(test::selected_cases(test::sampled_sweeps())),
                         [](const auto& info) { return info.param->name(); });

TEST(OpRegistry, HasCasesForEveryOpOfTheBackendInterface) {
  std::set<std::string> ops;
  for (const test::OpCase& c : test::op_cases()) ops.insert(c.op);
  for (const std::string& op : test::backend_op_names()) EXPECT_EQ(ops.count(op), 1u) << op;
  EXPECT_EQ(ops.size(), test::backend_op_names().size());
}

}  // namespace
}  // namespace mb

// SPDX-License-Identifier: MIT
// Zamba2 through the CLI: make-model --arch zamba2 with --set overrides, quantize to GGUF, and the
// folder and the file through logits (prefill == steps bit for bit), generate, run and bench.
#include <gtest/gtest.h>

#include "cli_test_support.h"
#include "common/model_fixture.h"
#include "common/test_util.h"
#include "io/npy.h"

namespace mb {
namespace {

using Zamba2CliOutput = test::CliOutput;
using test::run_cli;

TEST(Zamba2Cli, MakeModelQuantizeAndEveryCommand) {
  const std::string dir = test::make_temp_dir("cli_zamba2");
  const std::string folder = dir + "/zamba2";
  const Zamba2CliOutput made =
      run_cli("make-model --arch zamba2 --out " + folder +
              " --d-model 64 --n-layer 4 --vocab 301 --seed 8"
              " --set 'layers_block_type=[\"hybrid\",\"mamba\",\"hybrid\",\"hybrid\"]'"
              " --set num_mem_blocks=2 --set use_mem_rope=false");
  ASSERT_EQ(made.status, 0) << made.err;
  const auto model = Model::load(folder);
  EXPECT_EQ(model->config().zamba2.hybrid_layers, (std::vector<int64_t>{0, 2, 3}));
  EXPECT_FALSE(model->config().zamba2.mem_rope);
  const Zamba2CliOutput q = run_cli("quantize " + folder + " " + dir + "/q8_0.gguf --type q8_0");
  ASSERT_EQ(q.status, 0) << q.err;
  const Zamba2CliOutput bad = run_cli("make-model --arch zamba2 --out " + dir + "/bad --set hidden_act=relu");
  EXPECT_NE(bad.status, 0);
  EXPECT_NE(bad.err.find("hidden_act"), std::string::npos) << bad.err;

  const std::string tokens = " --tokens 5,6,7,8,9,10,11 --all-positions --out ";
  for (const std::string& path : {folder, dir + "/q8_0.gguf"}) {
    SCOPED_TRACE(path);
    const std::string m = " -m " + path + " ";
    ASSERT_EQ(run_cli("logits" + m + tokens + dir + "/p.npy").status, 0);
    ASSERT_EQ(run_cli("logits" + m + tokens + dir + "/s.npy --mode step").status, 0);
    std::vector<int64_t> shape;
    EXPECT_TRUE(test::same_bits(read_npy_f32(dir + "/p.npy", shape), read_npy_f32(dir + "/s.npy", shape)));
    EXPECT_EQ(shape, (std::vector<int64_t>{7, 301}));
    const Zamba2CliOutput generated = run_cli("generate" + m + "--tokens 1,2,3 -n 6 --ignore-eos");
    ASSERT_EQ(generated.status, 0) << generated.err;
    const Zamba2CliOutput run = run_cli("run" + m + "-p 'Once upon a time' -n 8 --seed 4 --ignore-eos");
    ASSERT_EQ(run.status, 0) << run.err;
    EXPECT_EQ(run.out.rfind("Once upon a time", 0), 0u) << run.out;
    const Zamba2CliOutput bench = run_cli("bench" + m + "--prompt-len 8 --gen-len 2 --repeats 1 --json");
    ASSERT_EQ(bench.status, 0) << bench.err;
  }
}

}  // namespace
}  // namespace mb

// SPDX-License-Identifier: MIT
// Jamba through the CLI: make-model --arch jamba (with experts, and dense with --set), logits from
// the folder and from GGUF files written by make-model and quantize, and --set refusals naming
// the key.
#include <gtest/gtest.h>

#include "cli_test_support.h"
#include "common/test_util.h"
#include "io/npy.h"

namespace mb {
namespace {

using test::run_cli;

TEST(JambaCli, MakeModelWritesFoldersAndGgufFilesThatEveryCommandReads) {
  const std::string dir = test::make_temp_dir("jamba_cli");
  const std::string moe = dir + "/moe", dense = dir + "/dense.gguf";
  const auto made =
      run_cli("make-model --arch jamba --out " + moe + " --d-model 64 --n-layer 4 --vocab 301 --seed 7");
  ASSERT_EQ(made.status, 0) << made.err;
  const auto dense_made = run_cli(
      "make-model --arch jamba --set num_experts=1 --set num_experts_per_tok=1 "
      "--set attn_layer_offset=0 --format gguf --out " +
      dense + " --d-model 64 --n-layer 3 --vocab 301 --seed 8");
  ASSERT_EQ(dense_made.status, 0) << dense_made.err;
  const auto quantized = run_cli("quantize " + moe + " " + dir + "/moe_q8_0.gguf --type q8_0");
  ASSERT_EQ(quantized.status, 0) << quantized.err;
  const std::string tokens = " --tokens 5,6,7,8,9 --all-positions --out ";
  for (const std::string& model : {moe, dense, dir + "/moe_q8_0.gguf"}) {
    const auto logits = run_cli("logits -m " + model + tokens + dir + "/logits.npy");
    ASSERT_EQ(logits.status, 0) << model << ": " << logits.err;
    std::vector<int64_t> shape;
    read_npy_f32(dir + "/logits.npy", shape);
    EXPECT_EQ(shape, (std::vector<int64_t>{5, 301})) << model;
  }
  const auto generated = run_cli("run -m " + moe + " -p hello -n 4");
  EXPECT_EQ(generated.status, 0) << generated.err;
  // More experts per token than experts: refused naming the key.
  const auto refused =
      run_cli("make-model --arch jamba --set num_experts_per_tok=9 --out " + dir + "/bad --vocab 301");
  EXPECT_NE(refused.status, 0);
  EXPECT_NE(refused.err.find("num_experts_per_tok"), std::string::npos) << refused.err;
}

}  // namespace
}  // namespace mb
